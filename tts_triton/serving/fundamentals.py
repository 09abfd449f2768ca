"""The fundamental of the decoder's frames, estimated once per network request instead of once per stream.

The harmonic vocoder takes each frame's fundamental (:mod:`tts_triton.core.fundamental`), estimated from the mel on
the host. Done by each stream for its own frames, that estimate was the largest part of the BLS's Python per decoder
call: some twenty small numpy operations on 48 frames, whatever the batch. :class:`FundamentalBackend` wraps the
network backend under the :class:`~tts_triton.serving.coalesce.Coalescer`, so it sees one merged request for the
streams of a loop and estimates every frame of it in one pass: to the outputs of each call that returns the decoder's
mel (the decoder, and the ensembles that end in it) it adds ``DECODED_F0`` ``[rows, frames]``. The pipeline takes it
for the frames it vocodes as decoded (:attr:`~tts_triton.serving.controls.Controls.keeps_frames`) and estimates the
frames it changes (speed, the mel warp) itself.
"""

from __future__ import annotations

import numpy as np

from tts_triton.core import contract
from tts_triton.core.fundamental import DECODED_F0, estimate
from tts_triton.serving.pipeline import InferBackend, served_ensembles

#: The calls that return the decoder's mel: the decoder and every ensemble with it among its members.
DECODING = frozenset({contract.DECODER} | {name for name, members in contract.ENSEMBLES.items()
                                           if contract.DECODER in members})


class FundamentalBackend:
    """An :class:`~tts_triton.serving.pipeline.InferBackend` over ``backend`` whose decoder calls also return
    ``DECODED_F0``, each frame's :func:`~tts_triton.core.fundamental.estimate`. It serves the ensembles
    ``backend`` serves."""

    def __init__(self, backend: InferBackend) -> None:
        self.backend = backend
        self.ensembles = served_ensembles(backend)

    async def infer(self, model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = await self.backend.infer(model, inputs)
        if model in DECODING:
            mel = outputs[contract.NET_MEL]
            outputs = {**outputs, DECODED_F0: estimate(mel.reshape(-1, mel.shape[-1])).reshape(mel.shape[:2])}
        return outputs
