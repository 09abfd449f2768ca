"""Text front end: normalization, sentence splitting, grapheme-to-phoneme conversion and the text plan."""

from tts_triton.text.frontend import (
    FrontendError,
    check_text,
    normalize,
    phonemize,
    sequence_to_text,
    split_sentences,
    text_to_sequences,
)
from tts_triton.text.planner import plan_text
from tts_triton.text.sentence import Sentence, Word

__all__ = [
    "FrontendError",
    "Sentence",
    "Word",
    "check_text",
    "normalize", "phonemize", "plan_text", "sequence_to_text", "split_sentences", "text_to_sequences",
]
