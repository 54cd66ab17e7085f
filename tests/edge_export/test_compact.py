"""edge_export.compact: the smaller model of a structured mask computes the masked model,
through pooling, Flatten, global pooling and per-channel layers; masks that are not whole
units are one line naming the layer."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from edge_export.compact import compact, max_difference
from fedprune.errors import DataError
from fedprune.models.cnn1d import build_har_cnn
from fedprune.models.cnn1d_small import build_har_cnn_small
from fedprune.sparsity import structured as S
from fedprune.sparsity.layers import prunable_mask_flags, select

L = tf.keras.layers


def _with_norms(kind: str) -> tf.keras.Model:
    inputs = tf.keras.Input((16, 3))
    h = L.Conv1D(8, 3, padding="same", name="conv1")(inputs)
    if kind == "batch":
        h = L.BatchNormalization(name="norm")(h)
    elif kind == "group":
        h = L.GroupNormalization(groups=-1, name="norm")(h)
    elif kind == "layer-time":
        h = L.LayerNormalization(axis=1, name="norm")(h)
    h = L.PReLU(name="prelu")(h)
    h = L.MaxPool1D(2)(h)
    h = L.Conv1D(6, 3, padding="same", activation="relu", name="conv2")(h)
    h = L.Flatten()(h)
    h = L.Dense(5, activation="tanh", name="dense")(h)
    h = L.LayerNormalization(name="ln_channels")(h)  # after the dense: its units stay whole
    h = L.Dense(4, name="hidden")(h)
    return tf.keras.Model(inputs, L.Dense(3, activation="softmax", name="out")(h))


def _image_model() -> tf.keras.Model:
    inputs = tf.keras.Input((8, 8, 2))
    h = L.Conv2D(6, 3, padding="same", activation="relu", name="conv")(inputs)
    h = L.AveragePooling2D(2)(h)
    h = L.Flatten()(h)
    h = L.Dense(7, activation="relu", name="dense")(h)
    return tf.keras.Model(inputs, L.Dense(3, activation="softmax", name="out")(h))


def _masked(model: tf.keras.Model, seed: int) -> list[np.ndarray]:
    """Random biases and moving statistics, random kept units (some of every group);
    ``model``'s kernels masked.
    Returns the kernel masks."""
    rng = np.random.default_rng(seed)
    for w in model.weights:  # Glorot kernels as built; biases, scales, offsets moved
        if len(w.shape) == 1:
            w.assign(w + rng.normal(0, 0.1, w.shape).astype(np.float32))
    for layer in model.layers:  # positive variances
        if isinstance(layer, L.BatchNormalization):
            layer.moving_variance.assign(rng.uniform(0.5, 2, layer.moving_variance.shape))
    flags = prunable_mask_flags(model)
    graph = S.unit_graph(model, flags, strict=False)
    keep = [rng.random(g.units) < 0.5 for g in graph.groups]
    for k in keep:  # at least one unit kept and one removed in every group
        first, second = rng.choice(k.size, 2, replace=False)
        k[first], k[second] = True, False
    masks = S.weight_masks(graph, keep)
    it = iter(masks)
    trainable = [
        w.numpy() * next(it) if f else w.numpy() for w, f in zip(model.trainable_weights, flags)
    ]
    for w, v in zip(model.trainable_weights, trainable):
        w.assign(v)
    return masks


MODELS = {
    "har_cnn": lambda: build_har_cnn((128, 9), 6, seed=0),
    "har_cnn_small": lambda: build_har_cnn_small((128, 9), 6, seed=0),
    "batch norm": lambda: _with_norms("batch"),
    "group norm": lambda: _with_norms("group"),
    "layer norm over time": lambda: _with_norms("layer-time"),
    "conv2d": _image_model,
}


@pytest.mark.parametrize("name", list(MODELS))
def test_the_smaller_model_computes_the_masked_one(name):
    model = MODELS[name]()
    masks = _masked(model, seed=len(name))
    smaller = compact(model, masks)
    x = np.random.default_rng(1).normal(size=(64, *model.input_shape[1:])).astype(np.float32)
    assert max_difference(model, smaller.model, x) <= 1e-5
    assert smaller.params[1] < smaller.params[0] == model.count_params()
    assert smaller.model.count_params() == smaller.params[1]
    graph = S.unit_graph(model, prunable_mask_flags(model), strict=False)
    for g, keep in zip(graph.groups, S.unit_masks(graph, masks)):
        assert smaller.compacted[g.layer][-1] == keep.sum() < smaller.original[g.layer][-1]
    last = [n for n, _ in graph.kept]
    assert all(smaller.compacted[n][-1] == smaller.original[n][-1] for n in last)


def test_layers_after_a_cross_channel_norm_keep_their_outputs():
    model = _with_norms("batch")
    masks = _masked(model, seed=3)
    smaller = compact(model, masks)
    assert smaller.compacted["dense"] != smaller.original["dense"]  # inputs cut
    assert smaller.compacted["dense"][-1] == 5  # LayerNormalization over its units follows


def test_a_per_weight_mask_is_one_line_naming_the_layer():
    model = build_har_cnn((128, 9), 6, seed=0)
    flags = prunable_mask_flags(model)
    rng = np.random.default_rng(0)
    masks = [(rng.random(k.shape) > 0.7).astype(np.float32) for k in select(model.weights, flags)]
    with pytest.raises(DataError, match="layer 'conv1' does not remove whole filters") as err:
        compact(model, masks)
    assert "\n" not in str(err.value)


def test_a_pruned_layer_before_an_unsupported_one_is_named():
    inputs = tf.keras.Input((16, 3))
    a = L.Conv1D(8, 3, padding="same", name="a")(inputs)
    h = L.Flatten()(L.Add(name="skip")([a, a]))
    model = tf.keras.Model(inputs, L.Dense(4, activation="softmax", name="out")(h))
    masks = [np.ones(k.shape, np.float32) for k in (model.weights[0], model.weights[2])]
    masks[0][..., 2] = 0
    with pytest.raises(DataError, match=r"layer 'a' does not remove whole .*\(.*'skip'"):
        compact(model, masks)
    masks[0][..., 2] = 1  # nothing removed: the same model
    assert compact(model, masks).compacted == compact(model, masks).original
