"""tfmot-style export: a ``prune_low_magnitude``-wrapped Keras model whose masks are ours.

The wrapped model uses a schedule that never fires (``begin_step`` far in the future), so
tfmot never recomputes the masks; ``tfmot.sparsity.keras.strip_pruning`` of it gives the
plain sparse Keras model (the kernels are already ⊙ mask).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf
import tensorflow_model_optimization as tfmot

# The wrapper class is not re-exported by tfmot's public API (0.7.5).
from tensorflow_model_optimization.python.core.sparsity.keras.pruning_wrapper import (
    PruneLowMagnitude,
)

from fedprune.sparsity.layers import prunable_weight_names

_NEVER = 2**62


def to_pruned_keras(
    model: tf.keras.Model,
    weights: Sequence[np.ndarray],
    kernel_masks: Sequence[np.ndarray],
) -> tf.keras.Model:
    """``model`` (a Keras model; its weights are replaced) wrapped by tfmot, with ``weights``
    (⊙ masks) and ``kernel_masks`` (one per prunable kernel, in layer order) set."""
    model.set_weights([np.asarray(w) for w in weights])
    schedule = tfmot.sparsity.keras.ConstantSparsity(0.5, begin_step=_NEVER, end_step=-1)

    def wrap(layer: tf.keras.layers.Layer) -> tf.keras.layers.Layer:
        if prunable_weight_names(layer):
            return tfmot.sparsity.keras.prune_low_magnitude(layer, pruning_schedule=schedule)
        return layer

    wrapped = tf.keras.models.clone_model(model, clone_function=wrap)
    wrapped.set_weights(_wrapped_weights(wrapped, model, kernel_masks))
    return wrapped


def _wrapped_weights(
    wrapped: tf.keras.Model, plain: tf.keras.Model, kernel_masks: Sequence[np.ndarray]
) -> list[np.ndarray]:
    """The wrapped model's weight list: kernels ⊙ mask, masks, thresholds, steps."""
    values = []
    masks = iter(kernel_masks)
    for layer, source in zip(wrapped.layers, plain.layers):
        if isinstance(layer, PruneLowMagnitude):
            mask = np.asarray(next(masks), np.float32)
            by_name = {}
            kernel, bias = source.get_weights()
            by_name["kernel"] = kernel * mask
            by_name["bias"] = bias
            by_name["mask"] = mask
            for w in layer.weights:
                name = w.name.split("/")[-1].split(":")[0]
                if name in by_name:
                    values.append(by_name[name])
                else:  # threshold, pruning_step
                    values.append(w.numpy())
        else:
            values.extend(source.get_weights())
    return values


def kernel_masks_of(wrapped: tf.keras.Model) -> list[np.ndarray]:
    """The mask variables of a ``prune_low_magnitude``-wrapped model, in layer order."""
    return [
        next(w.numpy() for w in layer.weights if w.name.split("/")[-1].startswith("mask"))
        for layer in wrapped.layers
        if isinstance(layer, PruneLowMagnitude)
    ]
