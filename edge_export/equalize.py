"""Activation equalization of a classifier's last hidden Dense layer, exact in float.

A full-integer TFLite model quantizes each activation tensor with one scale: the 32 ReLU
units of the HAR CNN's ``dense`` layer share one int8 grid whose step is set by the unit
with the largest calibration output. A unit whose outputs stay ten times smaller gets ten
times fewer steps; its rounding reaches the logits through the output layer. Measured on a
less confident personal model (a 10-round CA-AFP run with 95 % block-sparse dense layers,
docs/edge-export.md), fake-quantizing that one tensor in Keras flips 9 of 2,130 test
windows; every other tensor (input, convolutions, pools, logits, the weights) flips 0-3.

ReLU is positively homogeneous, so scaling unit ``j``'s kernel column and bias by
``s_j > 0`` and the output layer's kernel row ``j`` by ``1 / s_j`` leaves the model's
function unchanged (Nagel et al., "Data-Free Quantization Through Weight Equalization and
Bias Correction", ICCV 2019, apply the same identity between convolutions). With
``s_j = (R / r_j) ** power``, where ``r_j`` is unit ``j``'s largest calibration output and
``R`` the largest ``r_j``, ``power = 1`` gives every unit the whole grid, and the output
layer's kernel (quantized per tensor by TF 2.14's converter) takes the spread instead;
``power = 0.5`` splits it between the two. Which one is better depends on the model, so
:mod:`edge_export.calibration` measures the candidates per client. Dead units (``r_j = 0``)
keep ``s_j = 1``. Zeros of a pruned kernel stay zeros.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from edge_export.keras_chain import chain_layers, rebuild


def equalizable_pair(
    model: tf.keras.Model,
) -> tuple[tf.keras.layers.Dense, tf.keras.layers.Dense] | None:
    """The (last ReLU Dense layer, output Dense layer) pair, with only Dropout between them;
    ``None`` when the model does not end that way (no candidate then)."""
    try:
        layers = chain_layers(model)
    except Exception:  # noqa: BLE001 (not a chain: nothing to equalize)
        return None
    head = layers[-1]
    if not isinstance(head, tf.keras.layers.Dense):
        return None
    for layer in reversed(layers[:-1]):
        if isinstance(layer, tf.keras.layers.Dropout):
            continue
        relu = isinstance(layer, tf.keras.layers.Dense) and (
            layer.activation is tf.keras.activations.relu
        )
        return (layer, head) if relu else None
    return None


def unit_scales(hidden: np.ndarray, power: float) -> np.ndarray:
    """``s_j = (R / r_j) ** power`` from the hidden layer's outputs (windows x units); 1 for
    units that never fire."""
    r = np.asarray(hidden, dtype=np.float64).max(axis=0)
    scales = np.ones_like(r)
    live = r > 0
    if live.any():
        scales[live] = (r[live].max() / r[live]) ** power
    return scales.astype(np.float32)


def equalize(model: tf.keras.Model, x_calibration: np.ndarray, power: float) -> tf.keras.Model:
    """A copy of ``model`` with its last hidden Dense layer's units equalized (module
    docstring); ``model`` itself is unchanged. The model must have an
    :func:`equalizable_pair`."""
    pair = equalizable_pair(model)
    if pair is None:
        raise ValueError(f"model {model.name!r} has no ReLU Dense layer before its output")
    hidden, head = pair
    outputs = tf.keras.Model(model.inputs[0], hidden.output).predict(
        x_calibration, verbose=0, batch_size=512
    )
    s = unit_scales(outputs, power)
    copy = rebuild(model, chain_layers(model), batch_size=model.input_shape[0])
    kernel, bias = hidden.get_weights()
    copy.get_layer(hidden.name).set_weights([kernel * s, bias * s])
    head_kernel, head_bias = head.get_weights()
    copy.get_layer(head.name).set_weights([head_kernel / s[:, None], head_bias])
    return copy
