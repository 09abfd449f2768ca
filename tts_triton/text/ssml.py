"""SSML: a TEXT whose first element is ``<speak>``, turned into the same :class:`Sentence` plan as plain text.

The markup is parsed by ``defusedxml`` (no DTD, so no entity declarations, no external entities or
references; only XML's five named entities and character references), with the length bounded before
parsing and the depth and element count while parsing: hostile markup stops at the first element over a
bound. Supported (anything else is InvalidInput("TEXT", ...) naming the element or attribute):

- ``speak`` (root), ``p`` and ``s``: sentence bounds;
- ``break`` (``time`` "500ms"/"1.5s" up to 10 s, or ``strength``): silence; it ends the sentence there,
  as the ``pause_after`` of the sentence before it (``pause_before`` of the first one);
- ``prosody`` (``rate``, ``pitch``, ``volume``), ``emphasis`` (``level``): nested ones combine (rates
  multiply, semitones and decibels add) into the Sentence's ``rate``/``pitch``/``volume``; a change of
  them mid-sentence starts a new Sentence;
- ``say-as`` (``interpret-as`` characters, spell-out, cardinal, ordinal, digits, date with ``format``
  such as "mdy" (the default) or "ymd", time, telephone): read by :mod:`~tts_triton.text.readers` (as
  plain text when the content is not of that form); ``sub`` (``alias``) reads the alias;
- ``phoneme`` (``alphabet="ipa"``, ``ph``): the IPA mapped onto the phoneme set (:mod:`~tts_triton.text.ipa`);
- ``voice`` (``name``): a preset voice for its sentences.

Words of a reading, an alias or a phoneme point at the element's text in the markup; other words at
their own characters in the markup.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser, ParseError

from tts_triton.core.symbols import WORD_BOUNDARY
from tts_triton.errors import InvalidInput
from tts_triton.text import readers, ssml_values
from tts_triton.text.frontend import FrontendError, Spoken, Symbol, cut, phonemize_tracked, sentence, split_tracked
from tts_triton.text.ipa import ipa_symbols
from tts_triton.text.normalize import clean, clean_tracked
from tts_triton.text.sentence import Sentence
from tts_triton.text.tracked import Span, Tracked

#: Bounds on the markup (the service's own TEXT limit is lower; this one holds for any caller).
MAX_MARKUP_CHARS = 100_000
MAX_DEPTH = 32
MAX_ELEMENTS = 2_000
SSML_NAMESPACE = "http://www.w3.org/2001/10/synthesis"
_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
#: Element -> the attributes it may carry besides xml:lang.
ATTRIBUTES: dict[str, frozenset[str]] = {
    "speak": frozenset({"version", "{http://www.w3.org/2001/XMLSchema-instance}schemaLocation"}),
    "p": frozenset(), "s": frozenset(), "break": frozenset({"time", "strength"}),
    "prosody": frozenset({"rate", "pitch", "volume"}), "emphasis": frozenset({"level"}),
    "say-as": frozenset({"interpret-as", "format", "detail"}), "sub": frozenset({"alias"}),
    "phoneme": frozenset({"alphabet", "ph"}), "voice": frozenset({"name"}),
}
SAY_AS = ("characters", "spell-out", "cardinal", "ordinal", "digits", "date", "time", "telephone")
_TEXT_ONLY = frozenset({"say-as", "sub", "phoneme"})
_BOM = "\ufeff"
_SENTENCE_END = frozenset(".!?…")
_REFERENCE = re.compile(r"&(?:#\d+|#x[0-9A-Fa-f]+|[A-Za-z]+);")


@dataclass(frozen=True)
class _Controls:
    rate: float = 1.0
    pitch: float = 0.0
    volume: float = 0.0
    voice: str | None = None


@dataclass(frozen=True)
class _Text:
    text: Tracked
    controls: _Controls


@dataclass(frozen=True)
class _Phonemes:
    symbols: list[Symbol]
    controls: _Controls


@dataclass(frozen=True)
class _Break:
    seconds: float


class _Bound:
    """A sentence bound (``<s>``, ``<p>``)."""


@dataclass
class _Capture:
    """A text-only element being read: its start tag, where it starts, and its text so far."""
    tag: str
    attrib: dict[str, str]
    start: int
    parts: list[Tracked]


class _Builder:
    """Parser target: elements and text -> a flat list of items, each with the controls in force."""

    def __init__(self, markup: str) -> None:
        self.markup = markup
        self.expat: Any = None  # the expat parser, set once the parser is made (it reports byte positions)
        self._lead = 1 if markup.startswith(_BOM) else 0  # a byte-order mark is not fed to the parser
        self._chars = None if markup.isascii() else _char_offsets(markup[self._lead :])
        self.stack: list[tuple[str, _Controls]] = []
        self.items: list[_Text | _Phonemes | _Break | _Bound] = []
        self.elements = 0
        self.capture: _Capture | None = None

    def _where(self) -> str:
        return f"line {self.expat.CurrentLineNumber}, column {self.expat.CurrentColumnNumber}"

    def _position(self) -> int:
        offset = self.expat.CurrentByteIndex
        return self._lead + (offset if self._chars is None else self._chars[offset])

    def _controls(self) -> _Controls:
        return self.stack[-1][1] if self.stack else _Controls()

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        self.elements += 1
        if self.elements > MAX_ELEMENTS or len(self.stack) >= MAX_DEPTH:
            bound = f"{MAX_ELEMENTS} elements" if self.elements > MAX_ELEMENTS else f"{MAX_DEPTH} levels of nesting"
            raise InvalidInput("TEXT", f"SSML holds more than {bound} ({self._where()})")
        name = _local(tag)
        if name not in ATTRIBUTES:
            raise InvalidInput("TEXT", f"unsupported SSML element <{name}> at {self._where()}; supported: "
                                       f"{', '.join(ATTRIBUTES)}")
        if (name == "speak") != (not self.stack):
            raise InvalidInput("TEXT", f"<speak> must be the root element and only it ({self._where()})")
        if self.capture is not None:
            raise InvalidInput("TEXT", f"<{self.capture.tag}> holds only text, not <{name}> ({self._where()})")
        for key in attrib:
            if key != _XML_LANG and key not in ATTRIBUTES[name]:
                allowed = ", ".join(sorted(ATTRIBUTES[name])) or "none"
                raise InvalidInput("TEXT", f"unsupported attribute {_local(key)!r} of <{name}> at {self._where()}; "
                                           f"supported: {allowed}")
        controls = self._controls()
        if name == "break":
            self.items.append(_Break(ssml_values.break_seconds(attrib.get("time"), attrib.get("strength"))))
        elif name in ("s", "p"):
            self.items.append(_Bound())
        elif name == "prosody":
            controls = _combine(controls, ssml_values.rate_factor(attrib["rate"]) if "rate" in attrib else 1.0,
                                ssml_values.pitch_semitones(attrib["pitch"]) if "pitch" in attrib else 0.0,
                                ssml_values.volume_db(attrib["volume"]) if "volume" in attrib else 0.0)
        elif name == "emphasis":
            controls = _combine(controls, *ssml_values.emphasis(attrib.get("level")))
        elif name == "voice":
            voice = attrib.get("name", "").strip()
            if not voice:
                raise InvalidInput("TEXT", f"<voice> needs a name, the preset voice to use ({self._where()})")
            controls = dataclasses.replace(controls, voice=voice)
        elif name in _TEXT_ONLY:
            _check_text_only(name, attrib)
            self.capture = _Capture(name, attrib, self._position(), [])
        self.stack.append((name, controls))

    def data(self, data: str) -> None:
        piece = Tracked(data, _data_spans(self.markup, self._position(), data))
        if self.capture is not None:
            self.capture.parts.append(piece)
        else:
            self.items.append(_Text(piece, self._controls()))

    def end(self, tag: str) -> None:
        name, controls = self.stack.pop()
        if self.capture is not None and name == self.capture.tag:
            capture, self.capture = self.capture, None
            self.items.append(_read(capture, self._position(), controls))
        elif name in ("s", "p"):
            self.items.append(_Bound())

    def close(self) -> None:
        return None


def _local(tag: str) -> str:
    """An element or attribute name without the SSML namespace (another namespace stays, and is refused)."""
    return tag[len(SSML_NAMESPACE) + 2 :] if tag.startswith("{" + SSML_NAMESPACE + "}") else tag


def _char_offsets(markup: str) -> list[int]:
    """Byte offset in the UTF-8 markup -> character offset (for every byte that starts a character, and the end)."""
    chars = []
    for i, ch in enumerate(markup):
        chars += [i] * len(ch.encode())
    return [*chars, len(markup)]


def _data_spans(markup: str, at: int, data: str) -> tuple[Span, ...]:
    """Source spans of text the parser reports at character ``at``: a reference (&amp;, &#65;) spans
    itself for each character it stands for; an end of line written \\r\\n spans both characters."""
    reference = _REFERENCE.match(markup, at)
    if reference and not data.startswith(reference[0]):  # CDATA may hold a literal "&amp;"
        return (reference.span(),) * len(data)
    spans = []
    for ch in data:
        width = 2 if ch == "\n" and markup.startswith("\r\n", at) else 1
        spans.append((at, at + width))
        at += width
    return tuple(spans)


def _combine(controls: _Controls, rate: float, pitch: float, volume: float) -> _Controls:
    return dataclasses.replace(
        controls,
        rate=ssml_values.check_range("prosody", "rate", controls.rate * rate, ssml_values.RATE_RANGE),
        pitch=ssml_values.check_range("prosody", "pitch", controls.pitch + pitch, ssml_values.PITCH_RANGE),
        volume=ssml_values.check_range("prosody", "volume", controls.volume + volume, ssml_values.VOLUME_RANGE))


def _check_text_only(name: str, attrib: dict[str, str]) -> None:
    required = {"say-as": "interpret-as", "sub": "alias", "phoneme": "ph"}[name]
    if required not in attrib:
        raise InvalidInput("TEXT", f"<{name}> needs the attribute {required!r}")
    if name == "say-as" and attrib["interpret-as"] not in SAY_AS:
        raise InvalidInput("TEXT", f"<say-as interpret-as={attrib['interpret-as']!r}> is not supported; "
                                   f"supported: {', '.join(SAY_AS)}")
    if name == "phoneme" and attrib.get("alphabet", "ipa") != "ipa":
        raise InvalidInput("TEXT", f"<phoneme alphabet={attrib['alphabet']!r}> is not supported; only ipa")


def _read(capture: _Capture, end: int, controls: _Controls) -> _Text | _Phonemes:
    """A say-as, sub or phoneme element as what is said, its words pointing at the element's text."""
    content = Tracked.join(capture.parts)
    text = content.text.strip()
    span = content.span(0, len(content)) if text else (capture.start, max(end, capture.start + 1))
    attrib = capture.attrib
    if capture.tag == "phoneme":
        spoken = Spoken(text or attrib["ph"], *span, -1)
        return _Phonemes([(s, None if s == WORD_BOUNDARY else spoken) for s in ipa_symbols(attrib["ph"])], controls)
    if capture.tag == "sub":
        said = attrib["alias"]
    else:
        said = _say_as(attrib["interpret-as"], attrib.get("format"), text) or text
    return _Text(Tracked(said, (span,) * len(said)), controls)


def _say_as(interpret_as: str, format_: str | None, text: str) -> str | None:
    if interpret_as in ("characters", "spell-out"):
        return readers.characters(text)
    if interpret_as == "date":
        return readers.read_date(text, format_ or "mdy")
    reader = {"cardinal": readers.read_cardinal, "ordinal": readers.read_ordinal, "digits": readers.read_digits,
              "time": readers.read_time, "telephone": readers.read_telephone}[interpret_as]
    return reader(text)


def _parse(markup: str) -> list[_Text | _Phonemes | _Break | _Bound]:
    if len(markup) > MAX_MARKUP_CHARS:
        raise InvalidInput("TEXT", f"SSML has {len(markup)} characters; the limit is {MAX_MARKUP_CHARS}")
    builder = _Builder(markup)
    parser = DefusedXMLParser(target=builder, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    builder.expat = parser.parser
    parser.parser.buffer_text = False  # one callback per piece of text, so that its position is known
    try:
        parser.feed(markup[1:] if markup.startswith(_BOM) else markup)
        parser.close()
    except ParseError as e:
        raise InvalidInput("TEXT", f"malformed SSML: {e}") from None
    except DefusedXmlException as e:
        raise InvalidInput("TEXT", f"SSML may not hold a DTD, entity declarations or external references "
                                   f"({type(e).__name__} at {builder._where()})") from None
    return builder.items


def plan_ssml(markup: str, max_tokens: int | None = None) -> list[Sentence]:
    """SSML -> sentences (see the module docstring); raises InvalidInput("TEXT", ...)."""
    sentences: list[Sentence] = []
    group: list[_Text | _Phonemes] = []
    pause_before = 0.0

    def flush() -> None:
        nonlocal pause_before
        if not group:
            return
        controls = dataclasses.asdict(group[0].controls)
        for symbols in _symbols(group):
            for piece in cut(symbols, max_tokens):
                sentences.append(sentence(piece, **controls, pause_before=pause_before))
                pause_before = 0.0
        group.clear()

    for item in _parse(markup):
        if isinstance(item, _Break) and item.seconds == 0:  # strength="none": no break at all
            continue
        if isinstance(item, _Break | _Bound):
            flush()
            if isinstance(item, _Break) and sentences:
                sentences[-1] = dataclasses.replace(sentences[-1], pause_after=sentences[-1].pause_after + item.seconds)
            elif isinstance(item, _Break):
                pause_before += item.seconds
        else:
            if group and item.controls != group[0].controls:
                flush()
            group.append(item)
    flush()
    if not sentences:
        raise FrontendError("has nothing pronounceable: the SSML holds no text to speak")
    return sentences


def _symbols(group: list[_Text | _Phonemes]) -> list[list[Symbol]]:
    """Symbol sentences of consecutive items with one set of controls: text is read as plain text, a
    phoneme element joins the sentence it stands in."""
    out: list[list[Symbol]] = []
    texts: list[Tracked] = []

    def add(pieces: list[list[Symbol]]) -> None:
        for k, piece in enumerate(filter(None, pieces)):
            if k == 0 and out and out[-1] and out[-1][-1][0] not in _SENTENCE_END:
                out[-1] += [(WORD_BOUNDARY, None), *piece]
            else:
                out.append(list(piece))

    def read_texts() -> None:
        if texts:
            add(phonemize_tracked(split_tracked(clean_tracked(Tracked.join(texts)))))
            texts.clear()

    for item in group:
        if isinstance(item, _Text):
            texts.append(item.text)
        else:
            read_texts()
            add([item.symbols])
    read_texts()
    return out


def spoken_extent(markup: str) -> tuple[float, float]:
    """What an estimate of SSML's audio length reads: characters of normalised text (and phoneme symbols), each
    divided by its prosody rate, and seconds of breaks. Raises InvalidInput("TEXT", ...) as :func:`plan_ssml` does."""
    characters, pauses = 0.0, 0.0
    for item in _parse(markup):
        if isinstance(item, _Text):
            characters += len(clean(item.text.text)) / item.controls.rate
        elif isinstance(item, _Phonemes):
            characters += len(item.symbols) / item.controls.rate
        elif isinstance(item, _Break):
            pauses += item.seconds
    return characters, pauses
