"""Text front end: normalization, sentence splitting and grapheme-to-phoneme conversion."""
