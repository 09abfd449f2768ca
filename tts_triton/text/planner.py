"""Plain text or SSML to the text plan (the sentences and words of :mod:`tts_triton.text.sentence`).

    plan_text("Hello there. It costs $5!")  # two Sentences; words "Hello", "there" | "It", "costs", "five", ...
"""

from __future__ import annotations

import re

from tts_triton.text import frontend
from tts_triton.text.sentence import Sentence

_FIRST_ELEMENT = re.compile(r"\ufeff?\s*<(?:\?xml|!|speak[\s/>])")


def plan_text(text: str, max_tokens: int | None = None) -> list[Sentence]:
    """Plain text or SSML (first element <speak>) -> sentences; raises InvalidInput("TEXT", ...).

    With ``max_tokens`` no sentence has more ids than that (a longer one is cut as
    :func:`~tts_triton.text.frontend.text_to_sequences` cuts it; a word cut in two is in both pieces).
    """
    if is_ssml(text):
        try:
            from tts_triton.text import ssml  # it needs defusedxml: plain text does without
        except ImportError as e:
            raise RuntimeError(f"SSML needs the defusedxml package (pip install defusedxml): {e}") from e
        return ssml.plan_ssml(frontend.check_text(text), max_tokens)
    return frontend.plan_plain(text, max_tokens)


def is_ssml(text: str) -> bool:
    """Whether TEXT is markup: its first element is ``<speak>`` (after an optional byte-order mark and XML
    declaration; a DTD or comment there makes it markup too, which the parser then refuses or skips)."""
    return isinstance(text, str) and _FIRST_ELEMENT.match(text) is not None
