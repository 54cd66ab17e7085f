"""Per-client update rounds (AS-CFL, CFL, IFCA): plain SGD from each client's chosen model,
checked against softmax regression by hand (numpy)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from fedprune.data.partition import ClientData
from fedprune.engine import per_client
from fedprune.models import table
from fedprune.models.spec import ModelSpec

SHAPE, CLASSES = (3,), 4


def build_softmax_regression(input_shape, num_classes, seed=0):  # noqa: ANN001, ANN201
    """A model whose SGD step is easy to write in numpy: logits = x W + b."""
    inputs = tf.keras.Input(input_shape)
    init = tf.keras.initializers.RandomNormal(stddev=0.5, seed=seed)
    out = tf.keras.layers.Dense(num_classes, "softmax", kernel_initializer=init, name="probs")
    return tf.keras.Model(inputs, out(inputs))


@pytest.fixture
def spec(monkeypatch):
    entry = table.ModelEntry(
        "softmax_regression",
        "tests.engine.test_per_client:build_softmax_regression",
        "test model",
        ("probs",),
        "classification",
    )
    monkeypatch.setitem(table.MODELS, entry.name, entry)
    return ModelSpec(SHAPE, CLASSES, seed=0, model=entry.name)


def _client(cid: int, n: int, seed: int) -> ClientData:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, *SHAPE)).astype(np.float32)
    y = rng.integers(0, CLASSES, n)
    return ClientData(cid, x, y, x[:1], y[:1])


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _sgd_full_batch(w, b, x, y, lr, epochs):  # noqa: ANN001, ANN202
    """Full-batch SGD on the mean cross entropy: dL/dz = (p - onehot) / n."""
    w, b = w.astype(np.float64), b.astype(np.float64)
    for _ in range(epochs):
        p = _softmax(x @ w + b)
        p[np.arange(len(y)), y] -= 1.0
        w, b = w - lr * x.T @ p / len(y), b - lr * p.mean(axis=0)
    return w, b


def _models(spec: ModelSpec, k: int) -> list[list[np.ndarray]]:
    base = spec.initial_weights().trainable
    return [[w + 0.3 * m for w in base] for m in range(k)]


def test_each_client_trains_its_own_model_by_sgd(spec, tff_context):
    models = _models(spec, 2)
    clients = [_client(1, 8, 1), _client(2, 8, 2)]
    computation = per_client.build_update_round(spec, epochs=2, models=2)
    got = per_client.run_update_round(
        computation, models, 0.5, {1: 1, 2: 0}, clients, round_num=3, seed=0, batch_size=8
    )
    assert got.client_ids == [1, 2] and got.examples.tolist() == [16, 16]
    for client, start, update in zip(clients, (models[1], models[0]), got.updates):
        w, b = _sgd_full_batch(*start, client.x_train, client.y_train, 0.5, 2)
        np.testing.assert_allclose(update[0], w - start[0], atol=1e-5)
        np.testing.assert_allclose(update[1], b - start[1], atol=1e-5)


def test_zero_learning_rate_leaves_the_model_and_reports_its_loss(spec, tff_context):
    models = _models(spec, 3)
    clients = [_client(5, 6, 5)]
    computation = per_client.build_update_round(spec, epochs=1, models=3)
    got = per_client.run_update_round(computation, models, 0.0, {5: 2}, clients, 0, 0, 6)
    assert all(not np.any(u) for u in got.updates[0])
    losses = per_client.run_loss_round(per_client.build_loss_round(spec, models=3), models, clients)
    assert losses.shape == (1, 3)
    c = clients[0]
    for m, (w, b) in enumerate(models):
        p = _softmax(c.x_train.astype(np.float64) @ w + b)
        expected = -np.mean(np.log(p[np.arange(len(c.y_train)), c.y_train]))
        assert losses[0, m] == pytest.approx(expected, rel=1e-5)
    assert got.loss[0] == pytest.approx(losses[0, 2], rel=1e-5)


def test_bad_sizes_are_refused(spec):
    with pytest.raises(ValueError, match="epochs and models"):
        per_client.build_update_round(spec, epochs=0, models=1)


def test_per_client_epochs_train_each_client_its_own_number_of_epochs(spec, tff_context):
    # Full batches, so the numpy reference is exact: client 1 trains 3 epochs, client 2 one;
    # and repeating every client E times equals a computation built with epochs=E.
    models = _models(spec, 1)
    clients = [_client(1, 8, 1), _client(2, 8, 2)]
    once = per_client.build_update_round(spec, epochs=1, models=1)
    got = per_client.run_update_round(
        once, models, 0.5, {1: 0, 2: 0}, clients, 1, 0, 8, epochs=[3, 1]
    )
    assert got.examples.tolist() == [24, 8]
    for client, epochs, update in zip(clients, (3, 1), got.updates):
        w, b = _sgd_full_batch(*models[0], client.x_train, client.y_train, 0.5, epochs)
        np.testing.assert_allclose(update[0], w - models[0][0], atol=1e-5)
    twice = per_client.build_update_round(spec, epochs=2, models=1)
    inside = per_client.run_update_round(twice, models, 0.5, {1: 0, 2: 0}, clients, 1, 0, 4)
    outside = per_client.run_update_round(
        once, models, 0.5, {1: 0, 2: 0}, clients, 1, 0, 4, epochs=[2, 2]
    )
    for a, b in zip(inside.updates, outside.updates):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    with pytest.raises(ValueError, match="one integer >= 1 per client"):
        per_client.run_update_round(once, models, 0.5, {1: 0, 2: 0}, clients, 1, 0, 8, [1])
