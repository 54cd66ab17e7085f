"""The physically smaller Keras model of a structured mask (``--structure filters``).

A run trained with ``--structure filters`` (:mod:`fedprune.sparsity.structured`) has kernel
masks that remove whole filters and units together with the input rows of the next kernel
that read them. :func:`compact` builds the model those masks describe with the removed units
gone: the producing layer's ``filters`` / ``units`` cut to the kept ones (its kernel columns
and biases sliced), every per-channel layer between it and the next kernel sliced likewise
(``BatchNormalization``'s four vectors, ``PReLU``'s slopes, the scales and offsets of a
``GroupNormalization`` with one channel per group), and the next kernel's input rows cut to
the kept channels, through pooling and ``Flatten`` (row t x channels + c of a (time,
channels) tensor reads channel c). Layers without per-channel weights (activations, dropout,
pooling, ``LayerNormalization`` over other axes than the channels) are rebuilt as they are.

It computes what the masked model computes: a removed unit's output act(b_j) is read only by
masked rows, so dropping it drops terms that were zero (tests compare the two on every test
window of real runs to 1e-5). Masks that do not remove whole units (a per-weight run, or a
layer whose outputs stay whole in :func:`fedprune.sparsity.structured.unit_graph`) are one
:class:`~fedprune.errors.DataError` naming the layer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from fedprune.errors import DataError
from fedprune.sparsity.layers import prunable_mask_flags, select
from fedprune.sparsity.structured import unit_graph, unit_masks, weight_masks

# per-channel layers between a kernel and the next one whose weights are sliced on their
# last axis (the channels); every other layer between them has no per-channel weights
PER_CHANNEL = ("BatchNormalization", "PReLU", "GroupNormalization")
MATCH = 1e-5  # the largest |p_masked - p_compacted| export accepts on a client's test windows


@dataclasses.dataclass(frozen=True)
class Compacted:
    """The smaller model and the kernel shapes before and after (by layer)."""

    model: tf.keras.Model
    original: dict[str, list[int]]
    compacted: dict[str, list[int]]
    params: tuple[int, int]

    def record(self) -> dict:
        """What an exported file's ``.json`` records (``compaction``)."""
        return {
            "kernel_shapes": {"original": self.original, "compacted": self.compacted},
            "params": {"original": self.params[0], "compacted": self.params[1]},
        }


def compact(model: tf.keras.Model, kernel_masks: Sequence[np.ndarray]) -> Compacted:
    """The model ``model`` (its weights already masked) computes under ``kernel_masks``
    (one per prunable kernel, :func:`fedprune.sparsity.layers.prunable_mask_flags` order),
    with the removed filters and units gone."""
    flags = prunable_mask_flags(model)
    graph = unit_graph(model, flags, strict=False)
    masks = [np.asarray(m) > 0 for m in kernel_masks]
    if len(masks) != len(graph.shapes):
        raise DataError(f"{len(masks)} kernel masks for the model's {len(graph.shapes)} kernels")
    keep = unit_masks(graph, masks)
    expected = weight_masks(graph, keep)
    kernel_layers = [layer for layer in model.layers for w in layer.trainable_weights]
    kernel_layers = [layer.name for layer, f in zip(kernel_layers, flags) if f]
    why = dict(graph.kept)
    for name, mask, want in zip(kernel_layers, masks, expected):
        if mask.shape != want.shape or not np.array_equal(mask, want > 0):
            reason = f" ({why[name]})" if name in why else ""
            raise DataError(
                f"the mask of layer {name!r} does not remove whole filters or units{reason}: "
                "only a run trained with --structure filters is made smaller"
            )
    outputs: dict[str, np.ndarray] = {}  # producer layer -> kept output indices
    inputs: dict[str, tuple[np.ndarray, int]] = {}  # consumer -> (kept rows, units read)
    channels: dict[str, np.ndarray] = {}  # per-channel layer between them -> kept channels
    for g, k in zip(graph.groups, keep):
        kept = np.flatnonzero(k)
        outputs[g.layer] = kept
        rows = np.flatnonzero(k[g.rows(graph.shapes[g.consumer])])
        inputs[g.consumer_layer] = (rows, g.units)
        for name in g.through:
            channels[name] = kept
    smaller = _rebuild(model, outputs, channels)
    for layer in model.layers:
        target = smaller.get_layer(layer.name)
        values = [
            _slice(layer, i, np.asarray(w), outputs, inputs, channels)
            for i, w in enumerate(layer.get_weights())
        ]
        target.set_weights(values)
    original = {
        n: list(w.shape) for n, w in zip(kernel_layers, select(model.trainable_weights, flags))
    }
    new_kernels = select(smaller.trainable_weights, prunable_mask_flags(smaller))
    compacted = {n: list(w.shape) for n, w in zip(kernel_layers, new_kernels)}
    return Compacted(smaller, original, compacted, (model.count_params(), smaller.count_params()))


def _rebuild(
    model: tf.keras.Model, outputs: dict[str, np.ndarray], channels: dict[str, np.ndarray]
) -> tf.keras.Model:
    """``model``'s architecture with fewer filters / units where ``outputs`` says."""

    def clone(layer: tf.keras.layers.Layer) -> tf.keras.layers.Layer:
        config = layer.get_config()
        if layer.name in outputs:
            config["filters" if "filters" in config else "units"] = int(outputs[layer.name].size)
        if type(layer).__name__ == "GroupNormalization" and layer.name in channels:
            if config["groups"] != -1:  # one channel per group (unit_graph's rule)
                config["groups"] = int(channels[layer.name].size)
        return type(layer).from_config(config)

    return tf.keras.models.clone_model(model, clone_function=clone)


def _slice(
    layer: tf.keras.layers.Layer,
    index: int,
    value: np.ndarray,
    outputs: dict[str, np.ndarray],
    inputs: dict[str, tuple[np.ndarray, int]],
    channels: dict[str, np.ndarray],
) -> np.ndarray:
    """Weight ``index`` of ``layer`` cut to the kept outputs, input rows or channels."""
    name = layer.name
    kernel = index == 0 and value.ndim >= 2
    if kernel and name in inputs:
        value = np.take(value, inputs[name][0], axis=-2)
    if name in outputs:  # kernel columns, and the bias
        value = np.take(value, outputs[name], axis=-1)
    if name in channels and type(layer).__name__ in PER_CHANNEL:
        value = np.take(value, channels[name], axis=-1)
    return value


def max_difference(a: tf.keras.Model, b: tf.keras.Model, x: np.ndarray) -> float:
    """The largest |a(x) - b(x)| over the windows ``x`` (0 for no windows)."""
    if len(x) == 0:
        return 0.0
    return float(np.max(np.abs(np.asarray(a(x, training=False)) - b(x, training=False))))
