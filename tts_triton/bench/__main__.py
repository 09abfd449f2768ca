"""``python -m tts_triton.bench``: the same as ``tts-triton bench``."""

from tts_triton.bench import main

raise SystemExit(main())
