"""``python -m tts_triton.bench``: the same as ``tts-triton bench``."""

from tts_triton.bench import main

if __name__ == "__main__":  # importing the package's modules (a wheel check does) runs nothing
    raise SystemExit(main())
