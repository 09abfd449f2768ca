"""An OpenAI-compatible speech API in front of Triton's streaming ``tts`` model.

``POST /v1/audio/speech`` takes OpenAI's body and streams mp3, opus, aac, flac, wav or pcm (or SSE events)
as Triton synthesizes; see :mod:`.app` for the routes, :mod:`.schema` for the body, :mod:`.voices` for
the voice and emotion mapping, :mod:`.encoders` for the formats, :mod:`.limits` for keys and limits.
Run it with ``tts-triton gateway`` (:func:`serve`).
"""

from .app import create_app
from .config import GatewayConfig
from .errors import ApiError
from .server import serve

__all__ = ["ApiError", "GatewayConfig", "create_app", "serve"]
