"""Floating-point operations of one example through a Keras model: the numerator of
``make bench``'s bound.

Counted: the multiply-adds of convolutions (``Conv1D``, ``Conv2D``) and ``Dense``
layers, two FLOPs each; these are >99 % of the work of fedprune's CNNs and autoencoders.
Bias adds, activations, pooling and dropout are left out (a few tenths of a percent).

A training step costs :data:`TRAINING_FACTOR` = 3 forward passes: the forward pass, the
gradient with respect to the layer inputs and the gradient with respect to the weights each
take one product of the same size (the usual count; the first layer's input gradient is not
needed, so it slightly overstates the work and the bound it gives is slightly optimistic).

For the HAR CNN on UCI-HAR windows (128 x 9): 3.49 MFLOP forward, 10.47 MFLOP per training
window (the layer-by-layer count is in ``tests/models/test_flops.py``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

TRAINING_FACTOR = 3


@dataclasses.dataclass(frozen=True)
class Flops:
    """FLOPs per example: ``forward`` and ``training`` (one step), and the names of layers
    with weights this count does not model (``uncounted``; empty for fedprune's models)."""

    forward: int
    uncounted: tuple[str, ...] = ()

    @property
    def training(self) -> int:
        return TRAINING_FACTOR * self.forward


def _per_example(shape: object) -> int:
    dims = tf.TensorShape(shape).as_list()[1:]
    return int(np.prod(dims)) if dims else 1


def count(model: tf.keras.Model) -> Flops:
    """:class:`Flops` of one example through ``model`` (built, with known output shapes)."""
    total, uncounted = 0, []
    for layer in model._flatten_layers(include_self=False, recursive=True):  # noqa: SLF001
        if isinstance(layer, tf.keras.Model):
            continue  # a nested model: its layers are visited themselves
        transposed = tf.keras.layers.Conv1DTranspose | tf.keras.layers.Conv2DTranspose
        if isinstance(layer, tf.keras.layers.Conv1D | tf.keras.layers.Conv2D) and not isinstance(
            layer, transposed
        ):
            kernel = layer.kernel.shape  # spatial..., in_channels / groups, filters
            per_output = int(np.prod(kernel[:-1]))
            total += 2 * _per_example(layer.output_shape) * per_output
        elif isinstance(layer, tf.keras.layers.Dense):
            total += 2 * _per_example(layer.output_shape) * int(layer.kernel.shape[0])
        elif layer.weights:
            uncounted.append(layer.name)
    return Flops(total, tuple(uncounted))
