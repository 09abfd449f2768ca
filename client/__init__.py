"""Client library for the tts-triton service (gRPC streaming and HTTP)."""
