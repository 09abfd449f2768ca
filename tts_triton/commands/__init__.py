"""The ``tts-triton`` subcommands that are a client of something running: ``say`` and ``voices`` (a server),
``gateway`` (the gateway in front of servers). Each module registers its parsers; :mod:`tts_triton.cli` assembles
them. Nothing here imports a command's heavy dependencies until that command runs."""
