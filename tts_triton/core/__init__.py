"""The contract every part reads: tensor names and shapes, model and streaming settings, audio constants,
the voice bank, the repository's file names, default ports and where generated files go. Plain Python and
numpy (no Triton, no torch), so adapters, clients and the export import it alike."""
