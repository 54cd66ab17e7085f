"""What a Keras model becomes before a post-training integer conversion.

``int8``, ``int8-sparse``, ``int8-float-head`` and ``int16x8`` files take per-channel scaled
input (:mod:`edge_export.input_scaling`); the full-integer 8-bit ones also get their logits'
quantization range from where classes are decided (:mod:`edge_export.logit_range`;
``int8-float-head`` computes its logits in float). Both are exact in float; the
``-qat`` formats keep the ranges their fake-quant nodes learned, float formats convert the
model as it is.
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import tensorflow as tf

from edge_export.input_scaling import InputScaling, can_fold, fold_input_scaling
from edge_export.logit_range import decision_logit_range, logits, with_logit_range
from fedprune.data.partition import ClientData
from fedprune.errors import ConfigError

SCALED_INPUT_FORMATS = ("int8", "int8-sparse", "int8-float-head", "int16x8")
LOGIT_RANGE_FORMATS = ("int8", "int8-sparse")
INPUT_SCALINGS = ("per-channel", "per-tensor")
LOGIT_RANGES = ("decision", "full")


def device_normalization(client: ClientData, scaling: InputScaling | None) -> dict | None:
    """What the device applies to raw sensor values before the model (or before quantizing):
    the run's standardization, then the per-channel input scaling, as one affine map."""
    if scaling is None and client.mean is None:
        return None
    if scaling is None:
        scaling = InputScaling(client.mean.astype(np.float32), client.std.astype(np.float32))
    else:
        scaling = scaling.after(client.mean, client.std)
    return scaling.to_json()


@dataclasses.dataclass(frozen=True)
class Prepared:
    """The Keras model handed to the converter and what its input expects."""

    model: tf.keras.Model
    scaling: InputScaling | None = None  # the model takes scaling.apply(x)
    logit_range: tuple[float, float] | None = None

    def inputs(self, x: np.ndarray) -> np.ndarray:
        return x if self.scaling is None else self.scaling.apply(x)


def prepare_for_format(
    model: tf.keras.Model,
    fmt: str,
    x_calibration: np.ndarray,
    input_scaling: str = "per-channel",
    logit_range: str = "decision",
) -> Prepared:
    """The model to convert to ``fmt``: for post-training integer formats, with per-channel
    input scaling folded in (:mod:`edge_export.input_scaling`) and, for int8, its logits'
    quantization range from the calibration windows' lowest runner-up to highest top logit
    (:mod:`edge_export.logit_range`). Other formats convert ``model`` as it is.
    ``input_scaling="per-tensor"`` / ``logit_range="full"`` switch either step off."""
    if input_scaling not in INPUT_SCALINGS:
        raise ConfigError(f"--input-scaling must be one of {INPUT_SCALINGS}, got {input_scaling!r}")
    if logit_range not in LOGIT_RANGES:
        raise ConfigError(f"--logit-range must be one of {LOGIT_RANGES}, got {logit_range!r}")
    prepared = Prepared(model)
    if fmt in SCALED_INPUT_FORMATS and input_scaling == "per-channel" and not can_fold(model):
        first = model.layers[1 if isinstance(model.layers[0], tf.keras.layers.InputLayer) else 0]
        note_once(
            f"edge-export: note: the model's first layer {first.name!r} "
            f"({type(first).__name__}) cannot take per-channel input scaling; its integer "
            "files use one input scale (as --input-scaling per-tensor)"
        )
    elif fmt in SCALED_INPUT_FORMATS and input_scaling == "per-channel":
        scaling = InputScaling.fit(x_calibration)
        prepared = Prepared(fold_input_scaling(model, scaling), scaling)
    if fmt in LOGIT_RANGE_FORMATS and logit_range == "decision":
        lo, hi = decision_logit_range(logits(prepared.model, prepared.inputs(x_calibration)))
        prepared = dataclasses.replace(
            prepared, model=with_logit_range(prepared.model, lo, hi), logit_range=(lo, hi)
        )
    return prepared


_NOTED: set[str] = set()


def note_once(line: str) -> None:
    """Print ``line`` to stderr once per process (a note that holds for every client)."""
    if line not in _NOTED:
        _NOTED.add(line)
        print(line, file=sys.stderr)
