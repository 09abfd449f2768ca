"""What the load generators send and what they record: the one sentence set and request record of
``tts-triton bench`` and the Locust load test (``loadtest/locustfile.py``), and the repeat-ratio text chooser.

Imports nothing heavy (the Locust workers import it under gevent).
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass

__all__ = ["CODE_WORDS", "SENTENCES", "RequestRecord", "Workload"]

#: The request mix, cycled in this order: (kind, text). Request i speaks ``SENTENCES[i % 6]``.
SENTENCES: tuple[tuple[str, str], ...] = (
    ("short", "Hello there."),
    ("medium", "Please turn left at the next corner."),
    ("short", "Is it ready yet?"),
    ("long", "Thanks for calling; we will be with you in a moment."),
    ("short", "Good morning!"),
    ("medium", "The train to the airport leaves at noon."),
)

#: Words that make a text new (a code of four of them, after the sentence): a fresh text with a repeat ratio.
CODE_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo",
              "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform", "victor",
              "whiskey", "x-ray", "yankee", "zulu")
_CODE_LENGTH = 4  # 26**4 = 456,976 codes: runs that share a cache rarely draw the same one


@dataclass
class RequestRecord:
    """One stream, as a load generator saw it. Times are seconds from an origin the generator states (the bench:
    its level's start; the Locust load test: the Unix epoch); ``first_chunk`` and ``end`` stay None until the first
    audio arrives / the stream completes (None at the end: cut off or failed). ``measured``: counted in the
    latency statistics (the bench's opening burst and fillers are not); ``repeat``: the text was sent before in
    this run, so a server with an utterance cache may answer it from there."""

    index: int
    start: float
    measured: bool = True
    opening: bool = False
    text: str = ""
    repeat: bool = False
    voice: str = ""
    emotion: str = ""
    first_chunk: float | None = None
    end: float | None = None
    audio_seconds: float = 0.0
    chunks: int = 0
    error: str | None = None
    #: ``audio_seconds`` when the bench's level ended (a filler still running then finishes unmeasured)
    audio_when_loaded: float | None = None

    @property
    def ok(self) -> bool:
        """Completed without error."""
        return self.end is not None and self.error is None


class Workload:
    """The texts of a run, request by request (thread-safe).

    Without a repeat ratio, request i speaks ``SENTENCES[i % 6]``. With ``repeat_ratio`` R (0-1), each request
    repeats, with probability R, a text chosen uniformly among those of this run whose synthesis completed (the
    ones an utterance cache can hold); otherwise it speaks a text new to the run and to earlier runs: the
    sentence of the cycle followed by a code of four :data:`CODE_WORDS` (consecutive codes from a random start).
    ``seed`` fixes the repeat draws; the code start is random unless ``code_start`` is given, and successive codes are
    ``code_stride`` apart."""

    def __init__(self, repeat_ratio: float | None = None, *, seed: int = 0, code_start: int | None = None,
                 code_stride: int = 1) -> None:
        if repeat_ratio is not None and not 0.0 <= repeat_ratio <= 1.0:
            raise ValueError(f"repeat ratio must be within 0-1, not {repeat_ratio}")
        self.repeat_ratio = repeat_ratio
        self._draws = random.Random(seed)
        self._code = random.randrange(len(CODE_WORDS) ** _CODE_LENGTH) if code_start is None else code_start
        self._stride = code_stride
        self._issued = 0
        self._done: list[str] = []
        self._known: set[str] = set()
        self._lock = threading.Lock()

    def next(self) -> tuple[int, str, bool]:
        """(index, text, whether it repeats an earlier text of the run) of the next request."""
        with self._lock:
            index = self._issued
            self._issued += 1
            sentence = SENTENCES[index % len(SENTENCES)][1]
            if self.repeat_ratio is None:
                return index, sentence, False
            if self._done and self._draws.random() < self.repeat_ratio:
                return index, self._draws.choice(self._done), True
            text = f"{sentence} {self._code_words()}."
            return index, text, False

    def completed(self, text: str) -> None:
        """``text`` was synthesized in full: later requests may repeat it."""
        with self._lock:
            if text not in self._known:
                self._known.add(text)
                self._done.append(text)

    def known(self) -> list[str]:
        """The texts completed so far (those a repeat may draw)."""
        with self._lock:
            return list(self._done)

    def beside(self, parts: int) -> list[tuple[int, int]]:
        """(code start, code stride) for ``parts`` workloads that run beside this one (:mod:`tts_triton.bench.clients`):
        workload i draws this one's next codes i, i + parts, i + 2 parts, ... Call :meth:`skip_codes` with what they
        drew in all before this one draws again."""
        with self._lock:
            return [(self._code + i, parts) for i in range(parts)]

    def skip_codes(self, codes: int) -> None:
        """Move past ``codes`` codes drawn elsewhere."""
        with self._lock:
            self._code += codes

    def _code_words(self) -> str:
        n, words = self._code % len(CODE_WORDS) ** _CODE_LENGTH, []
        self._code += self._stride
        for _ in range(_CODE_LENGTH):
            n, digit = divmod(n, len(CODE_WORDS))
            words.append(CODE_WORDS[digit])
        return " ".join(words).capitalize()
