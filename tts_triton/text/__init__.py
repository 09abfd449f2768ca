"""Text front end: normalization, sentence splitting and grapheme-to-phoneme conversion."""

from tts_triton.text.frontend import (
    FrontendError,
    check_text,
    normalize,
    phonemize,
    sequence_to_text,
    split_sentences,
    text_to_sequences,
)

__all__ = [
    "FrontendError",
    "check_text",
    "normalize", "phonemize", "sequence_to_text", "split_sentences", "text_to_sequences",
]
