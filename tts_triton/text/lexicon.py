"""A user's pronunciation lexicon: words the front end reads from a file instead of guessing them.

The file is UTF-8 text, one entry per line, ``WORD<TAB>PRONUNCIATION``; blank lines and lines starting with
``#`` are skipped::

    # word        pronunciation: /IPA/ between slashes, or a respelling read as English
    NVIDIA	/ɛnˈvɪdiə/
    Nguyen	win
    Triton	TRY ton

The front end applies it after normalization, before G2P: a word with an IPA entry gets the entry's symbols,
mapped onto the model's phoneme set as SSML ``<phoneme>`` is (:func:`~tts_triton.text.ipa.ipa_symbols`); a
word with a respelling is read as the respelling. A WORD is one word of letters, with inner apostrophes (the
normalized text splits "Wi-Fi" into two words, and reads digits as words). An entry in lowercase matches the
word in any case ("nguyen": Nguyen, NGUYEN); one with capitals only as written ("US", not "us"). Entries
apply to plain text and to SSML text (``<sub>`` aliases and ``<say-as>`` readings too), never inside
``<phoneme>``.

The serving processes read the file named by the environment variable :data:`LEXICON_ENV` (``tts-triton serve
--lexicon FILE`` sets it; the Helm chart mounts a ConfigMap there) and read it again when its modification time
or size changes. A file that cannot be read or is invalid is refused with :class:`LexiconError` naming the
line and the problem; while serving, a broken edit keeps the lexicon read before it (and logs why).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from tts_triton.errors import InvalidInput
from tts_triton.text.ipa import ipa_symbols

log = logging.getLogger(__name__)

#: The environment variable with the lexicon's path, for the serving processes.
LEXICON_ENV = "TTS_LEXICON"
#: Entries in one file at most (a lexicon is read whole on every change).
MAX_ENTRIES = 100_000
#: A word as the lexicon matches it in normalized text: letters, with inner apostrophes.
WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*")


class LexiconError(ValueError):
    """The lexicon file cannot be used; the message names the file, the line and the problem."""


@dataclass(frozen=True)
class Pronunciation:
    """One entry: the phoneme symbols of an IPA pronunciation, or a respelling (exactly one is set)."""

    symbols: tuple[str, ...] = ()
    respelling: str = ""


class Lexicon:
    """Entries by word as written in the file (see the module docstring for how case is matched); ``digest``: the
    SHA-256 of the file's text (the utterance cache keys on it, so an edit never serves audio of the old one)."""

    def __init__(self, entries: dict[str, Pronunciation], digest: str = "") -> None:
        self.entries = entries
        self.digest = digest

    def __len__(self) -> int:
        return len(self.entries)

    def lookup(self, word: str) -> Pronunciation | None:
        """The entry of ``word``: written exactly so, else (for a word with capitals) written in lowercase."""
        return self.entries.get(word) or self.entries.get(word.lower())

    @classmethod
    def parse(cls, text: str, source: str = "lexicon") -> Lexicon:
        """The entries of a lexicon file's ``text``; raises :class:`LexiconError` ("SOURCE line N: ...")."""
        entries: dict[str, Pronunciation] = {}
        lines: dict[str, int] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            where = f"{source} line {number}"
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            fields = line.strip().split("\t")
            if len(fields) != 2 or not all(f.strip() for f in fields):
                raise LexiconError(f"{where}: expected WORD<TAB>PRONUNCIATION, got {line.strip()[:80]!r}")
            word, said = fields[0].strip().replace("’", "'"), fields[1].strip()
            if not WORD.fullmatch(word):
                raise LexiconError(f"{where}: {word[:40]!r} is not one word of letters (with inner apostrophes); "
                                   "hyphens and periods split words, so give each part its own entry")
            if word in lines:
                raise LexiconError(f"{where}: {word!r} is listed twice (first on line {lines[word]})")
            entries[word], lines[word] = _pronunciation(said, where), number
            if len(entries) > MAX_ENTRIES:
                raise LexiconError(f"{where}: more than {MAX_ENTRIES} entries")
        return cls(entries, hashlib.sha256(text.encode("utf-8")).hexdigest())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Lexicon:
        """The lexicon in file ``path``; raises :class:`LexiconError` naming the file (and line) and the problem."""
        try:
            text = Path(path).read_bytes().decode("utf-8")
        except OSError as err:
            raise LexiconError(f"lexicon {path}: {err.strerror or err}") from None
        except UnicodeDecodeError as err:
            raise LexiconError(f"lexicon {path}: not UTF-8 ({err.reason} at byte {err.start})") from None
        return cls.parse(text, f"lexicon {path}")

    def matches(self, text: str) -> list[tuple[int, int, Pronunciation]]:
        """``(start, end, entry)`` of each word of ``text`` that has an entry, in order."""
        found = []
        for match in WORD.finditer(text):
            if (entry := self.lookup(match[0])) is not None:
                found.append((match.start(), match.end(), entry))
        return found


def _pronunciation(said: str, where: str) -> Pronunciation:
    if said.startswith("/") != said.endswith("/") or said == "/":
        raise LexiconError(f"{where}: an IPA pronunciation goes between two slashes, /like this/; got {said[:80]!r}")
    if not said.startswith("/"):
        if not any(ch.isalpha() for ch in said) or not all(ch.isalpha() or ch in " '" for ch in said):
            raise LexiconError(f"{where}: the respelling {said[:80]!r} must be words of letters (spaces and "
                               "apostrophes between), or IPA between slashes")
        return Pronunciation(respelling=" ".join(said.split()))
    try:
        return Pronunciation(symbols=tuple(ipa_symbols(said[1:-1])))
    except InvalidInput as err:  # its reason names the symbol, after the SSML element's own framing
        raise LexiconError(f"{where}: {said}: {err.reason.split(': ', 1)[-1]}") from None


class _Current:
    """The lexicon of :data:`LEXICON_ENV`, read again when the file's modification time or size changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: tuple[str, int, int] | None = None
        self._lexicon: Lexicon | None = None

    def get(self) -> Lexicon | None:
        path = os.environ.get(LEXICON_ENV)
        if not path:
            return None
        try:
            stat = os.stat(path)
        except OSError as err:
            return self._keep(f"lexicon {path}: {err.strerror or err}", (path, -1, -1))
        key = (path, stat.st_mtime_ns, stat.st_size)
        if key == self._key:
            return self._lexicon
        with self._lock:
            if key != self._key:
                try:
                    self._lexicon = Lexicon.load(path)
                    log.info("lexicon %s: %d entries", path, len(self._lexicon))
                except LexiconError as err:
                    return self._keep(str(err), key)
                self._key = key
        return self._lexicon

    def _keep(self, problem: str, key: tuple[str, int, int]) -> Lexicon | None:
        """Keep the lexicon read before (if any), logging ``problem`` once per state of the file."""
        if key != self._key:
            self._key = key
            log.warning("%s; %s", problem, "keeping the lexicon read before" if self._lexicon else "no lexicon")
        return self._lexicon


_CURRENT = _Current()


def current() -> Lexicon | None:
    """The serving lexicon (:data:`LEXICON_ENV`), None when there is none; cheap to call per request."""
    return _CURRENT.get()
