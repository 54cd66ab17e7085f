"""Stacked training: per client, the same as Keras fit with Adam and a mask constraint."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from fedprune.algorithms.caafp.finetune import finetune_all
from fedprune.data.partition import ClientData
from fedprune.engine.stacked import (
    StackedModel,
    grouped_conv_gradient_available,
    plan_of,
    predict_each,
)
from fedprune.models.cnn1d import build_har_cnn

SHAPE = (16, 3)
NEEDS_GROUPED = pytest.mark.skipif(
    not grouped_conv_gradient_available(),
    reason="grouped-convolution gradients need TensorFlow's oneDNN kernels "
    "(TF_ENABLE_ONEDNN_OPTS=1); .ci/run runs these tests a second time with it on",
)
FORMULATIONS = [pytest.param("grouped", marks=NEEDS_GROUPED), "per-client"]


def _client_weights(k: int) -> list[list[np.ndarray]]:
    return [build_har_cnn(SHAPE, 4, seed=10 * c).get_weights() for c in range(k)]


def _masks(weights: list[np.ndarray], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.random(w.shape) > 0.6).astype(np.float32) for w in weights if w.ndim > 1]


@pytest.mark.parametrize("conv", FORMULATIONS)
def test_forward_equals_keras_per_client(conv):
    weights = _client_weights(3)
    stack = StackedModel(build_har_cnn(SHAPE, 4), weights, conv=conv)
    x = np.random.default_rng(0).normal(size=(3, 7, *SHAPE)).astype(np.float32)
    probs = stack.predict(x)
    model = build_har_cnn(SHAPE, 4)
    for c in range(3):
        model.set_weights(weights[c])
        np.testing.assert_allclose(probs[c], model(x[c]).numpy(), atol=1e-5)


@pytest.mark.parametrize("conv", FORMULATIONS)
def test_training_equals_keras_fit_without_dropout_and_shuffle(conv):
    """Two clients of different sizes (the smaller sits steps out), masked kernels, 2 epochs."""
    weights, sizes = _client_weights(2), (13, 21)
    masks = [_masks(w, c) for c, w in enumerate(weights)]
    rng = np.random.default_rng(1)
    xs = [rng.normal(size=(n, *SHAPE)).astype(np.float32) for n in sizes]
    ys = [rng.integers(0, 4, n) for n in sizes]

    def no_dropout(model: tf.keras.Model) -> tf.keras.Model:
        for layer in model.layers:
            if isinstance(layer, tf.keras.layers.Dropout):
                layer.rate = 0.0
        return model

    stack = StackedModel(
        no_dropout(build_har_cnn(SHAPE, 4)), weights, masks, learning_rate=0.01, conv=conv
    )
    stack.fit_epochs(xs, ys, epochs=2, batch_size=8, shuffle_rngs=None)
    for c in range(2):
        model = no_dropout(build_har_cnn(SHAPE, 4, masked=True))
        kernels = [layer for layer in model.layers if hasattr(layer, "kernel")]
        for layer, mask in zip(kernels, masks[c]):
            layer.kernel_constraint.mask.assign(mask)
        model.set_weights([w * m for w, m in zip(weights[c], _with_biases(masks[c]))])
        model.compile(tf.keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy")
        model.fit(xs[c], ys[c], batch_size=8, epochs=2, shuffle=False, verbose=0)
        for got, want in zip(stack.client_weights(c), model.get_weights()):
            np.testing.assert_allclose(got, want, atol=2e-5)


def _with_biases(kernel_masks: list[np.ndarray]) -> list[np.ndarray]:
    out = []
    for m in kernel_masks:
        out += [m, np.ones(m.shape[-1], np.float32)]
    return out


@pytest.mark.parametrize("conv", FORMULATIONS)
def test_the_small_model_with_its_global_average_trains_as_keras_fit(conv):
    """``har_cnn_small`` (GlobalAveragePooling1D): forward and two masked epochs per client."""
    from fedprune.models.cnn1d_small import build_har_cnn_small

    def small(seed: int | None = None, masked: bool = False) -> tf.keras.Model:
        model = build_har_cnn_small(SHAPE, 4, seed=seed, masked=masked)
        for layer in model.layers:
            if isinstance(layer, tf.keras.layers.Dropout):
                layer.rate = 0.0
        return model

    weights = [small(seed=10 * c).get_weights() for c in range(2)]
    masks = [_masks(w, c) for c, w in enumerate(weights)]
    rng = np.random.default_rng(2)
    xs = [rng.normal(size=(n, *SHAPE)).astype(np.float32) for n in (11, 17)]
    ys = [rng.integers(0, 4, n) for n in (11, 17)]
    stack = StackedModel(small(), weights, masks, learning_rate=0.01, conv=conv)
    model = small()
    for c in range(2):  # the stack starts from the masked weights
        model.set_weights([w * m for w, m in zip(weights[c], _with_biases(masks[c]))])
        np.testing.assert_allclose(stack.predict(np.stack([xs[0][:5]] * 2))[c],
                                   model(xs[0][:5]).numpy(), atol=1e-5)  # fmt: skip
    stack.fit_epochs(xs, ys, epochs=2, batch_size=4, shuffle_rngs=None)
    for c in range(2):
        model = small(masked=True)
        kernels = [layer for layer in model.layers if hasattr(layer, "kernel")]
        for layer, mask in zip(kernels, masks[c]):
            layer.kernel_constraint.mask.assign(mask)
        model.set_weights([w * m for w, m in zip(weights[c], _with_biases(masks[c]))])
        model.compile(tf.keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy")
        model.fit(xs[c], ys[c], batch_size=4, epochs=2, shuffle=False, verbose=0)
        for got, want in zip(stack.client_weights(c), model.get_weights()):
            np.testing.assert_allclose(got, want, atol=2e-5)


def test_masked_weights_stay_zero_and_dropout_is_per_client():
    weights = _client_weights(3)
    masks = [_masks(w, c) for c, w in enumerate(weights)]
    rng = np.random.default_rng(2)
    xs = [rng.normal(size=(n, *SHAPE)).astype(np.float32) for n in (9, 9, 30)]
    ys = [rng.integers(0, 4, len(x)) for x in xs]
    seeds = [5, 6, 7]

    def train(clients: list[int]) -> StackedModel:
        stack = StackedModel(
            build_har_cnn(SHAPE, 4),
            [weights[c] for c in clients],
            [masks[c] for c in clients],
            [seeds[c] for c in clients],
        )
        shuffles = [np.random.default_rng(seeds[c]) for c in clients]
        stack.fit_epochs([xs[c] for c in clients], [ys[c] for c in clients], 3, 4, shuffles)
        return stack

    three = train([0, 1, 2])
    for c in range(3):
        kernels = [w for w in three.client_weights(c) if w.ndim > 1]
        for k, m in zip(kernels, masks[c]):
            assert np.all(k[m == 0] == 0)
        assert not np.allclose(kernels[0], weights[c][0])  # it trained
    alone = train([0])
    for got, want in zip(alone.client_weights(0), three.client_weights(0)):
        np.testing.assert_allclose(got, want, atol=1e-5)


def _train_three_clients(conv: str) -> list[list[np.ndarray]]:
    """Three clients, masks, dropout and shuffling, 2 epochs: every client's final weights."""
    weights = _client_weights(3)
    masks = [_masks(w, c) for c, w in enumerate(weights)]
    rng = np.random.default_rng(4)
    xs = [rng.normal(size=(n, *SHAPE)).astype(np.float32) for n in (7, 12, 19)]
    ys = [rng.integers(0, 4, len(x)) for x in xs]
    stack = StackedModel(build_har_cnn(SHAPE, 4), weights, masks, [3, 4, 5], conv=conv)
    shuffles = [np.random.default_rng(s) for s in (3, 4, 5)]
    stack.fit_epochs(xs, ys, 2, 4, shuffles)
    return [stack.client_weights(c) for c in range(3)]


@NEEDS_GROUPED
def test_grouped_and_per_client_convolutions_train_the_same():
    for a, b in zip(_train_three_clients("grouped"), _train_three_clients("per-client")):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, atol=2e-5)


_ONEDNN_RUN = """
import json, sys
sys.path.insert(0, {tests!r})
from engine.test_stacked import _train_three_clients
from fedprune.engine.stacked import default_conv_formulation
weights = _train_three_clients("auto")
print(json.dumps([default_conv_formulation(), [[w.tolist() for w in c] for c in weights]]))
"""


@pytest.mark.slow
def test_same_result_with_onednn_on_and_off():
    """Two fresh processes, TF_ENABLE_ONEDNN_OPTS=0 and =1, each with its default formulation."""
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    results = {}
    for setting in ("0", "1"):
        env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS=setting, TF_CPP_MIN_LOG_LEVEL="3")
        out = subprocess.run(
            [sys.executable, "-c", _ONEDNN_RUN.format(tests=tests)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        results[setting] = json.loads(out.stdout.strip().splitlines()[-1])
    assert results["0"][0] == "per-client"  # no grouped gradient without oneDNN, on any CPU
    for a, b in zip(results["0"][1], results["1"][1]):
        for x, y in zip(a, b):
            np.testing.assert_allclose(np.array(x), np.array(y), atol=2e-5)


def test_unknown_formulation_is_refused():
    with pytest.raises(ValueError, match="'im2col'"):
        StackedModel(build_har_cnn(SHAPE, 4), _client_weights(1), conv="im2col")


def test_wrong_number_of_masks_is_refused():
    weights = _client_weights(2)
    with pytest.raises(ValueError, match="4 kernel masks"):
        StackedModel(build_har_cnn(SHAPE, 4), weights, [_masks(w, 0)[:3] for w in weights])


def test_unsupported_layer_is_named():
    inputs = tf.keras.Input(SHAPE)
    h = tf.keras.layers.GRU(4, name="gru")(inputs)
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(2, activation="softmax")(h))
    with pytest.raises(ValueError, match="'gru'"):
        plan_of(model)


def _finetune_inputs(seed: int, sizes: tuple[tuple[int, int], ...]) -> tuple:
    """Random clients ``(id, training windows)`` with 5 test windows each, their start
    weights and masks, for :func:`finetune_all`."""
    rng = np.random.default_rng(seed)
    clients = [
        ClientData(
            cid,
            rng.normal(size=(n, *SHAPE)).astype(np.float32),
            rng.integers(0, 4, n),
            rng.normal(size=(5, *SHAPE)).astype(np.float32),
            rng.integers(0, 4, 5),
        )
        for cid, n in sizes
    ]
    start = {c.client_id: w for c, w in zip(clients, _client_weights(len(clients)))}
    return clients, start, {cid: _masks(w, cid) for cid, w in start.items()}


def test_finetune_all_reports_test_accuracy_of_each_client():
    clients, start, masks = _finetune_inputs(3, ((1, 11), (4, 17)))
    out = finetune_all(SHAPE, 4, clients, start, masks, [1, 2], seed=0, batch_size=4)
    assert set(out) == {1, 2} and set(out[2]) == {1, 4}
    stack = StackedModel(build_har_cnn(SHAPE, 4), [out[2][c.client_id][1] for c in clients])
    probs = predict_each(stack, [c.x_test for c in clients])
    for c, p in zip(clients, probs):
        assert out[2][c.client_id][0] == pytest.approx(np.mean(p.argmax(-1) == c.y_test))
    again = finetune_all(SHAPE, 4, clients, start, masks, [1, 2], seed=0, batch_size=4)
    for cid in (1, 4):
        for a, b in zip(out[2][cid][1], again[2][cid][1]):
            np.testing.assert_array_equal(a, b)


def test_a_length_does_not_depend_on_the_other_lengths_reported():
    """``reproduce finetune`` reports FT 0, 1, 3, ..., 25 from one run; its FT 3 and FT 25
    must be those of a Table 2 run (lengths 3 and 25) of the same seed."""
    clients, start, masks = _finetune_inputs(4, ((2, 9), (5, 13)))
    few = finetune_all(SHAPE, 4, clients, start, masks, [3, 5], seed=1, batch_size=4)
    many = finetune_all(SHAPE, 4, clients, start, masks, [0, 1, 3, 4, 5], seed=1, batch_size=4)
    for e in (3, 5):
        for cid in (2, 5):
            assert few[e][cid][0] == many[e][cid][0]
            for a, b in zip(few[e][cid][1], many[e][cid][1]):
                np.testing.assert_array_equal(a, b)
