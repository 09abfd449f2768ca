"""``python -m tts_triton.evaluate``."""

from tts_triton.evaluate.cli import main

raise SystemExit(main())
