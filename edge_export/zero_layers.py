"""Find the first layer of a Keras model that is zero on every one of a set of windows.

A personal model can come out of fine-tuning with every unit of a layer dead (its ReLU output
is 0 for all of the client's training windows). Seen in the device study: a WISDM client whose
training windows are all one activity, with the 5 dense units a filters-85 % mask keeps; a
constant output is then a perfect fit to its data. Nothing downstream of such a layer sees the
input, so a chain model then gives the same class for every window that keeps the layer at
zero, and its test accuracy is the share of its test windows in that class (100 % on a client
whose test windows are all one activity). The int8 file also inherits an output scale of about
zero there, which XNNPACK refuses (:mod:`edge_export.requantization`).

Interpretation: "zero" is exactly 0.0 in float32 for every element of the layer's output on
every window given (the export passes the client's training windows, the converter's
calibration set); the first such layer in the model's layer order is reported.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

BATCH = 256  # windows per forward pass


@dataclasses.dataclass(frozen=True)
class ZeroLayer:
    layer: str  # the Keras layer's name
    units: int  # the size of its output per window (units, or filters x positions)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def first_zero_layer(model: tf.keras.Model, x: np.ndarray) -> ZeroLayer | None:
    """The first layer (after the inputs) whose output is zero on every window of ``x``;
    ``None`` where every layer is non-zero somewhere, or ``x`` is empty."""
    layers = [layer for layer in model.layers if not isinstance(layer, tf.keras.layers.InputLayer)]
    if len(x) == 0 or not layers:
        return None
    probe = tf.keras.Model(model.inputs, [layer.output for layer in layers])
    nonzero = np.zeros(len(layers), dtype=bool)
    for start in range(0, len(x), BATCH):
        outputs = probe(x[start : start + BATCH].astype(np.float32), training=False)
        outputs = outputs if isinstance(outputs, list | tuple) else [outputs]
        nonzero |= [bool(np.any(np.asarray(out) != 0)) for out in outputs]
        if nonzero.all():
            return None
    index = int(np.argmin(nonzero))  # the first False
    return ZeroLayer(layer=layers[index].name, units=int(np.prod(layers[index].output.shape[1:])))
