"""The synthetic corpus: espeak-ng voices x emotions speaking generated English sentences.

``sentences`` (the text and its split), ``prosody`` (voice and emotion tables, the renderer),
``corpus`` (``python -m tts_triton.data.corpus build``) and ``dataset`` (torch datasets over a
rendered corpus). See docs/corpus.md.
"""
