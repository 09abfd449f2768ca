"""``python -m tts_triton.evaluate``."""

from tts_triton.evaluate.cli import main

if __name__ == "__main__":  # importing the package's modules (a wheel check does) runs nothing
    raise SystemExit(main())
