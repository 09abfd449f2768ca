"""The cached value: an utterance's chunks as 16-bit PCM with each chunk's other fields.

Layout: ``MAGIC``, a 4-byte little-endian header length, the UTF-8 JSON header, the PCM of every chunk
back to back (int16 little-endian), then the other arrays' bytes. The header holds the format version,
the entry's own key and checkpoint digest (checked on read: an entry is only ever served for the key it
was written under), the sample rate, and per chunk its sample count and its other fields.

Chunk fields are stored generically: the audio as PCM; other arrays (the mel) as float16 when floating
(else as they are), referenced from the header by offset, dtype and shape; JSON-able values (numbers,
strings, lists, dicts, dataclasses, possibly nested) as JSON, rebuilt from the field's type hint on read.
No pickle: whoever can write to Redis must not be able to run code here.
"""

from __future__ import annotations

import dataclasses
import json
import struct
import types
import typing
from collections.abc import Sequence
from typing import Any

import numpy as np

from tts_triton.cache.key import FORMAT_VERSION
from tts_triton.serving.pipeline import Chunk

MAGIC = b"TTSC"
_LENGTH = struct.Struct("<I")
#: The chunk field that holds the audio (float32 in [-1, 1]); stored as int16.
AUDIO_FIELD = "audio"
#: The chunk field that marks the stream's last chunk: not kept in an entry.
LAST_FIELD = "last"
PCM_SCALE = 32767.0


class EntryError(ValueError):
    """The bytes are not an entry of this format, key and checkpoint."""


def to_pcm16(samples: np.ndarray) -> np.ndarray:
    """Float audio -> int16 PCM: clipped to [-1, 1], scaled by :data:`PCM_SCALE`, rounded to nearest."""
    return np.rint(np.clip(np.asarray(samples, np.float32), -1.0, 1.0) * PCM_SCALE).astype("<i2")


def from_pcm16(pcm: np.ndarray) -> np.ndarray:
    """int16 PCM -> float32 audio (the exact inverse of :func:`to_pcm16` on its outputs)."""
    return (pcm.astype(np.float32) / np.float32(PCM_SCALE)).astype(np.float32)


def chunk_fields() -> list[dataclasses.Field]:
    """The fields of :class:`Chunk` an entry keeps besides the audio, in declaration order (``last`` is the stream's
    position, not content: :func:`decode` marks the entry's last chunk)."""
    return [f for f in dataclasses.fields(Chunk) if f.name not in (AUDIO_FIELD, LAST_FIELD)]


def _to_json(value: Any, blobs: list[bytes]) -> Any:
    """``value`` as JSON; its arrays' bytes are appended to ``blobs`` and referenced by offset."""
    if isinstance(value, np.ndarray):
        stored = _stored(value)
        ref = {"@array": sum(len(b) for b in blobs), "dtype": value.dtype.str, "stored": stored.dtype.str,
               "shape": list(value.shape)}
        blobs.append(stored.tobytes())
        return ref
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_json(getattr(value, f.name), blobs) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_to_json(v, blobs) for v in value]
    if isinstance(value, dict):
        return {str(k): _to_json(v, blobs) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


def _from_json(hint: Any, value: Any, blobs: bytes = b"") -> Any:
    """Rebuild ``value`` as the type ``hint`` says (arrays from ``blobs``, dataclasses, lists/tuples/dicts
    of them, optionals)."""
    if isinstance(value, dict) and "@array" in value:
        stored = np.dtype(value["stored"])
        count = int(np.prod(value["shape"], dtype=np.int64))
        flat = np.frombuffer(blobs, dtype=stored, count=count, offset=int(value["@array"]))
        return flat.astype(np.dtype(value["dtype"])).reshape(value["shape"])
    if value is None:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        return _from_json(options[0], value, blobs) if len(options) == 1 else value
    if dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint)
        return hint(**{k: _from_json(hints.get(k, Any), v, blobs) for k, v in value.items()})
    if origin in (list, tuple) and args:
        items = [_from_json(args[0], v, blobs) for v in value]
        return tuple(items) if origin is tuple else items
    if origin is dict and len(args) == 2:
        return {k: _from_json(args[1], v, blobs) for k, v in value.items()}
    return value


def encode(chunks: Sequence[Chunk], *, key: str, checkpoint_sha256: str, sample_rate: int) -> bytes:
    """The entry bytes of ``chunks`` (in stream order)."""
    blobs: list[bytes] = []
    meta = [{f.name: _to_json(getattr(c, f.name), blobs) for f in chunk_fields()} for c in chunks]
    pcm = [to_pcm16(c.audio) for c in chunks]
    header = {"version": FORMAT_VERSION, "key": key, "checkpoint_sha256": checkpoint_sha256,
              "sample_rate": sample_rate, "samples": [int(p.size) for p in pcm], "chunks": meta}
    raw = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return b"".join([MAGIC, _LENGTH.pack(len(raw)), raw, *(p.tobytes() for p in pcm), *blobs])


def stored_size(chunk: Chunk) -> int:
    """Bytes of the chunk's arrays in an entry: summed over chunks, :func:`encode`'s size less its header,
    which the entry bound is checked against while the stream runs."""
    arrays = [getattr(chunk, f.name) for f in chunk_fields()]
    return 2 * int(chunk.audio.size) + sum(_stored(a).nbytes for a in arrays if isinstance(a, np.ndarray))


def _stored(array: np.ndarray) -> np.ndarray:
    """An array as an entry holds it: float16 when floating, little-endian, C order."""
    kind = np.dtype("<f2") if array.dtype.kind == "f" else array.dtype.newbyteorder("<")
    return np.ascontiguousarray(array, dtype=kind)


def decode(data: bytes, *, key: str, checkpoint_sha256: str, sample_rate: int) -> list[Chunk]:
    """The chunks of an entry written by :func:`encode` for this key, checkpoint and rate; raises
    :class:`EntryError` for anything else (another format, a foreign or damaged entry)."""
    try:
        if data[:4] != MAGIC:
            raise EntryError("not a cache entry (bad magic)")
        (length,) = _LENGTH.unpack_from(data, 4)
        header = json.loads(data[8:8 + length].decode("utf-8"))
        expected = {"version": FORMAT_VERSION, "key": key, "checkpoint_sha256": checkpoint_sha256,
                    "sample_rate": sample_rate}
        wrong = [name for name, value in expected.items() if header.get(name) != value]
        if wrong:
            raise EntryError(f"entry does not match this request and deployment: {', '.join(wrong)} differ")
        counts, metas = header["samples"], header["chunks"]
        if len(counts) != len(metas):
            raise EntryError(f"entry header lists {len(counts)} sample counts for {len(metas)} chunks")
        pcm = np.frombuffer(data, dtype="<i2", count=sum(counts), offset=8 + length)
        blobs = data[8 + length + pcm.nbytes:]
        hints = typing.get_type_hints(Chunk)
        chunks, start = [], 0
        for count, meta in zip(counts, metas, strict=True):
            fields = {f.name: _from_json(hints[f.name], meta[f.name], blobs) for f in chunk_fields()}
            chunks.append(Chunk(**{AUDIO_FIELD: from_pcm16(pcm[start:start + count])}, **fields))
            start += count
        if chunks:
            chunks[-1].last = True
        return chunks
    except EntryError:
        raise
    except (ValueError, KeyError, TypeError, struct.error, UnicodeDecodeError) as err:
        raise EntryError(f"damaged cache entry: {type(err).__name__}: {err}") from None
