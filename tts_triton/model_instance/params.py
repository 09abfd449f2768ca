"""Reading the model configs of the Python-backend models, free of Triton.

The repository builder writes the parameters named in :mod:`tts_triton.core.layout` into every generated
``config.pbtxt``; the models read them back with :func:`parameters` and :func:`int_parameter` from the
parsed ``args["model_config"]`` JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tts_triton.core.contract import TRITON_DTYPES, ModelSpec, TensorSpec

_NUMPY_DTYPES = {triton: numpy for numpy, triton in TRITON_DTYPES.items()}

def parameters(model_config: Mapping[str, Any]) -> dict[str, str]:
    """The string parameters of a model config (the parsed ``args["model_config"]`` JSON)."""
    return {key: value["string_value"] for key, value in model_config.get("parameters", {}).items()}


def int_parameter(model_config: Mapping[str, Any], key: str, default: int) -> int:
    """Parameter ``key`` as an int, ``default`` when absent; a non-integer value raises ``ValueError``."""
    value = parameters(model_config).get(key)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        model = model_config.get("name")
        raise ValueError(f"model {model!r}: parameter {key!r} must be an integer, got {value!r}") from None


def config_tensors(model_config: Mapping[str, Any], kind: str) -> list[TensorSpec]:
    """The ``kind`` ("input" or "output") tensors a model config declares, as contract specs (batch excluded)."""
    return [
        TensorSpec(t["name"], _NUMPY_DTYPES[t["data_type"]], tuple(int(d) for d in t["dims"]), bool(t.get("optional")))
        for t in model_config.get(kind, [])
    ]


def input_axes_parameter(spec: ModelSpec) -> str:
    """The :data:`INPUT_AXES` parameter of a network's config: the contract's axis names of each input."""
    return json.dumps({t.name: [d if isinstance(d, str) else "" for d in t.dims] for t in spec.inputs})
