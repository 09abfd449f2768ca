"""Grapheme-to-phoneme conversion with the espeak-ng library, called in process through ctypes.

Why the library rather than the ``espeak-ng`` program fed on stdin: the program starts a process and runs the
synthesizer for every clause to print its phonemes, and its output lines must be mapped back to input clauses.
``espeak_TextToPhonemes`` only translates (the same IPA as the program in our checks, except that the program
stresses a lone function word, "and" -> ˈænd) and is called once per clause, so nothing has to be matched up.
The library keeps global state (current voice, translation buffers) and is not
thread-safe, so each text holds one module lock while it is read (not the whole batch, so that a long batch
holds back another thread's short one by one text at most); that costs little beside a sentence's synthesis. The
price is that a crash inside espeak-ng would take the serving process with it; its input is therefore
reduced by normalization to letters, marks, digits, apostrophes and spaces.

Text is routed by script: Latin to ``en-us``; Chinese characters to ``cmn-latn-pinyin`` (the plain
``cmn`` voice of espeak-ng 1.51 reads many characters as pinyin spelled in English, 你好 -> "ni three
hao three"); a few other scripts to their own voice; letters of any other script are dropped. Mandarin
is read as espeak-ng's ASCII phoneme names and mapped here, because its IPA mode keeps only the first
digit of a tone contour (tones 1 and 4 both become "5", 35 becomes "ɜ") and writes some consonants with
"." (ʂ as "s."). Tones become 1-4 and 5 (neutral). The library leaves out the third-tone sandhi that the
program applies, so it is applied here.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import itertools
import logging
import re
import threading
import unicodedata
from collections.abc import Iterator
from functools import lru_cache

from tts_triton.core.symbols import IPA, LENGTH, STRESS, TONES, WORD_BOUNDARY
from tts_triton.text.align import align_words

log = logging.getLogger(__name__)

Span = tuple[int, int]

ENGLISH = "en-us"
MANDARIN = "cmn-latn-pinyin"
#: First word of a letter's Unicode name -> espeak-ng voice.
_SCRIPT_VOICES = {"LATIN": ENGLISH, "CJK": MANDARIN, "CYRILLIC": "ru", "GREEK": "el", "ARABIC": "ar",
                  "HEBREW": "he", "HANGUL": "ko", "HIRAGANA": "ja", "KATAKANA": "ja", "DEVANAGARI": "hi"}

#: espeak-ng's ASCII names of the Mandarin phonemes -> symbols of the inventory.
#: Checked against every character in U+3400-4DB5, U+4E00-9FA5 and U+F900-FA6D: none is left unmapped.
_MANDARIN_PHONEMES = {
    "p": "p", "ph": "pʰ", "t": "t", "th": "tʰ", "k": "k", "kh": "kʰ", "ts": "ts", "tsh": "tsʰ",
    "ts.": "ʈʂ", "ts.h": "ʈʂʰ", "tS;": "tɕ", "tS;h": "tɕʰ", "f": "f", "s": "s", "s.": "ʂ", "S;": "ɕ",
    "z.": "ʐ", "X": "x", "m": "m", "n": "n", "N": "ŋ", "N-": "ŋ\u0329", "l": "l", "w": "w", "j": "j",
    "v": "v", ";": "ʲ", "a": "a", "A": "ɑ", "@": "ə", "@r": "ɚ", "e": "e", "E": "ɛ", "i": "i",
    "i.": "ɻ\u0329", "i[": "ɹ\u0329", "o": "o", "o-": "ɤ", "ong": "ʊŋ", "u": "u", "y": "y", "&": "æ",
    "'": "ˈ", ",": "ˌ", ":": "ː",
}
#: Tone contours (Chao numbers) -> tones 1-4; any other contour is the neutral tone 5.
_TONE_CONTOURS = {"55": "1", "35": "2", "214": "3", "213": "3", "21": "3", "51": "4", "53": "4"}
_MANDARIN_TOKEN = re.compile(
    "|".join(map(re.escape, sorted(_MANDARIN_PHONEMES, key=len, reverse=True))) + r"|\d+|\s+|.", re.DOTALL
)
_LANGUAGE_SWITCH = re.compile(r"\([a-z]{2,3}(?:-[a-z0-9]+)*\)")  # "(en)" ... "(cmn)" around switched words
_PHONES = frozenset((*STRESS, *LENGTH, *IPA))

_AUDIO_OUTPUT_RETRIEVAL = 1
_INITIALIZE_DONT_EXIT = 0x8000
_CHARS_UTF8 = 1
_PHONEMES_IPA = 0x02


class _Espeak:
    """The process-wide espeak-ng library, loaded on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lib: ctypes.CDLL | None = None
        self._voice: str | None = None

    @staticmethod
    def _load() -> ctypes.CDLL:
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("espeak-ng") or "libespeak-ng.so.1")
        except OSError as e:
            raise RuntimeError("the espeak-ng library is missing: install espeak-ng (Debian: libespeak-ng1)") from e
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_TextToPhonemes.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_int]
        lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
        if lib.espeak_Initialize(_AUDIO_OUTPUT_RETRIEVAL, 0, None, _INITIALIZE_DONT_EXIT) < 0:
            raise RuntimeError("espeak-ng failed to initialize: is espeak-ng-data installed?")
        return lib

    def translate(self, voice: str, texts: list[str]) -> list[str] | None:
        """Phonemes of each text (IPA; ASCII names for Mandarin); None when espeak-ng has no such voice."""
        mode = 0 if voice == MANDARIN else _PHONEMES_IPA
        phonemes = []
        for text in texts:
            with self._lock:  # per text, not per batch (module docstring)
                if self._lib is None:
                    self._lib = self._load()
                if voice != self._voice:
                    self._voice = None
                    if self._lib.espeak_SetVoiceByName(voice.encode()) != 0:
                        return None
                    self._voice = voice
                phonemes.append(self._text_to_phonemes(self._lib, text, mode))
        return phonemes

    @staticmethod
    def _text_to_phonemes(lib: ctypes.CDLL, text: str, mode: int) -> str:
        buffer = ctypes.create_string_buffer(text.encode())
        pointer = ctypes.c_void_p(ctypes.addressof(buffer))
        parts = []
        while pointer.value:  # one call per espeak-ng clause; the pointer ends as NULL
            phonemes = lib.espeak_TextToPhonemes(ctypes.byref(pointer), _CHARS_UTF8, mode)
            if phonemes is None:  # espeak-ng >= 1.52 returns NULL, without advancing, on undecodable text
                break
            parts.append(phonemes.decode(errors="replace"))
        return " ".join(parts)


_ESPEAK = _Espeak()
#: (voice, word) -> the word's symbols read alone, for :func:`phonemize_words`.
_ALONE: dict[tuple[str, str], list[str]] = {}
_ALONE_SIZE = 8192


@lru_cache(maxsize=8192)
def _voice_for(ch: str) -> str | None:
    """Voice for a letter ("" for a script without one); None for digits, marks, apostrophes and spaces."""
    if not ch.isalpha():
        return None
    return _SCRIPT_VOICES.get(unicodedata.name(ch, "").split(" ", 1)[0], "")


def _runs(text: str) -> list[tuple[str, int, str]]:
    """Split a clause into (voice, offset in the clause, text) runs of one script each, stripped.

    A non-letter joins the run of the letter before it (or after it, at the start), except digits
    next to a Mandarin run, which are read in Mandarin (normalization keeps only those as digits).
    """
    voices = [_voice_for(ch) for ch in text]

    def last(acc: str | None, voice: str | None) -> str | None:
        return acc if voice is None else voice

    before = list(itertools.accumulate(voices, last))
    after = list(itertools.accumulate(reversed(voices), last))[::-1]
    runs: list[tuple[str, int, list[str]]] = []
    for i, (ch, voice, b, a) in enumerate(zip(text, voices, before, after, strict=True)):
        if voice is None:
            neighbours = [v for v in (b, a) if v is not None] or [ENGLISH]
            voice = MANDARIN if ch.isdigit() and MANDARIN in neighbours else neighbours[0]
        if runs and runs[-1][0] == voice:
            runs[-1][2].append(ch)
        else:
            runs.append((voice, i, [ch]))
    result = []
    for voice, start, chars in runs:
        run = "".join(chars)
        if stripped := run.strip():
            result.append((voice, start + len(run) - len(run.lstrip()), stripped))
    return result


def _append_boundary(symbols: list[str]) -> None:
    if symbols and symbols[-1] != WORD_BOUNDARY:
        symbols.append(WORD_BOUNDARY)


def _ipa_symbols(ipa: str, unknown: set[str]) -> list[str]:
    """Inventory symbols of espeak-ng IPA; a letter with an unknown diacritic keeps its base letter."""
    symbols: list[str] = []
    for ch in _LANGUAGE_SWITCH.sub("", ipa):
        if ch.isspace():
            _append_boundary(symbols)
            continue
        for part in (ch,) if ch in _PHONES else unicodedata.normalize("NFD", ch):
            if part in _PHONES:
                symbols.append(part)
            else:
                unknown.add(part)
    return symbols[:-1] if symbols[-1:] == [WORD_BOUNDARY] else symbols


def _mandarin_symbols(names: str, unknown: set[str]) -> list[str]:
    """Inventory symbols of espeak-ng's ASCII Mandarin phonemes, tones as 1-5, third-tone sandhi applied."""
    symbols: list[str] = []
    for token in _MANDARIN_TOKEN.findall(names):
        if token in _MANDARIN_PHONEMES:
            symbols.extend(_MANDARIN_PHONEMES[token])
        elif token.isdigit():
            symbols.append(_TONE_CONTOURS.get(token, "5"))
        elif token.isspace():
            _append_boundary(symbols)
        elif token not in "_!|":  # pauses (_ and _!) and word ends (|)
            unknown.add(token)
    tones = [i for i, s in enumerate(symbols) if s in TONES]
    for i, j in itertools.pairwise(tones):
        if symbols[i] == symbols[j] == "3":
            symbols[i] = "2"
    return symbols[:-1] if symbols[-1:] == [WORD_BOUNDARY] else symbols


def phonemize_clauses(clauses: list[str]) -> list[list[str]]:
    """Phoneme symbols of each clause (text without pause punctuation), words separated by " ".

    Each voice translates all its runs in one locked batch. Symbols outside the inventory and text
    in scripts without a voice are dropped with a warning; content never raises.
    """
    return [[symbol for symbol, _ in clause] for clause in phonemize_words(clauses)]


def phonemize_words(clauses: list[str]) -> list[list[tuple[str, Span | None]]]:
    """As :func:`phonemize_clauses`, each symbol with the ``[start, end)`` span in its clause of the
    space-separated word it belongs to (None for the boundaries between words).

    Where espeak-ng's words are the clause's words one for one (the usual case), word i owns output word
    i; where it joins or splits words (it joins unstressed ones: "in the" -> "ɪnðə"), each word is also
    translated alone and the clause's symbols are shared out by aligning the two (see :mod:`align`).
    """
    runs = [_runs(clause) for clause in clauses]
    flat = [(voice, text) for clause_runs in runs for voice, _, text in clause_runs]
    unknown: set[str] = set()
    symbols = _translate(flat, unknown)
    words = [text.split() for _, text in flat]
    alone_of = [i for i, (run, w) in enumerate(zip(symbols, words, strict=True))
                if len(w) > 1 and _count_words(run) != len(w)]
    alone = iter(_translate_alone([(flat[i][0], word) for i in alone_of for word in words[i]], unknown))
    owners: list[list[int | None]] = []
    for i, (run, w) in enumerate(zip(symbols, words, strict=True)):
        if i in alone_of:
            owners.append(align_words(run, [next(alone) for _ in w]))
        else:
            owner = itertools.count() if len(w) > 1 else itertools.repeat(0)
            index = next(owner)
            run_owners: list[int | None] = []
            for symbol in run:
                if symbol == WORD_BOUNDARY:
                    index = next(owner)
                    run_owners.append(None)
                else:
                    run_owners.append(index)
            owners.append(run_owners)
    if unknown:
        log.warning("dropped phonemes outside the inventory: %s", " ".join(map(ascii, sorted(unknown))))
    result = []
    flat_index = itertools.count()
    for clause_runs in runs:
        clause: list[tuple[str, Span | None]] = []
        for _, start, text in clause_runs:
            i = next(flat_index)
            spans = [(start + m.start(), start + m.end()) for m in re.finditer(r"\S+", text)]
            if symbols[i]:
                if clause and clause[-1][0] != WORD_BOUNDARY:
                    clause.append((WORD_BOUNDARY, None))
                clause += [(symbol, None if owner is None else spans[owner])
                           for symbol, owner in zip(symbols[i], owners[i], strict=True)]
        result.append(clause)
    return result


def _count_words(symbols: list[str]) -> int:
    return sum(1 for word in "".join(symbols).split(WORD_BOUNDARY) if word)


def _translate_alone(words: list[tuple[str, str]], unknown: set[str]) -> list[list[str]]:
    """:func:`_translate` of single words, remembered (the words espeak-ng joins are few and frequent)."""
    known = {w: symbols for w in set(words) if (symbols := _ALONE.get(w)) is not None}
    missing = [w for w in dict.fromkeys(words) if w not in known]
    read = dict(zip(missing, _translate(missing, unknown), strict=True))
    if len(_ALONE) + len(read) > _ALONE_SIZE:
        _ALONE.clear()
    _ALONE.update(read)
    known.update(read)
    return [known[w] for w in words]


def _translate(runs: list[tuple[str, str]], unknown: set[str]) -> list[list[str]]:
    """Inventory symbols of each (voice, text), one locked batch per voice; text of a script without a
    voice gives [] and a warning."""
    texts: dict[str, list[str]] = {}
    for voice, text in runs:
        texts.setdefault(voice, []).append(text)
    unspoken: list[str] = []
    symbols: dict[str, Iterator[list[str]]] = {}
    for voice, batch in texts.items():
        phonemes = _ESPEAK.translate(voice, batch) if voice else None
        if phonemes is None:
            unspoken += batch
            phonemes = [""] * len(batch)
        to_symbols = _mandarin_symbols if voice == MANDARIN else _ipa_symbols
        symbols[voice] = iter([to_symbols(p, unknown) for p in phonemes])
    if unspoken:
        log.warning("dropped text with no espeak-ng voice: %s", ascii(" ".join(unspoken)[:200]))
    return [next(symbols[voice]) for voice, _ in runs]
