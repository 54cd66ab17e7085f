"""experiments/peer_round.py: the multi-process plain-Keras FedAvg round computes FedAvg.

One round of two clients on one worker process is compared with the same round computed here,
one client after another in plain Keras: same start, same Adam state per client, same seeds;
then the example-weighted mean.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

import peer_round  # noqa: E402

pytestmark = pytest.mark.slow


def tiny_model():  # noqa: ANN201 (module level, so that the spawned worker can build it)
    import tensorflow as tf

    return tf.keras.Sequential(
        [
            tf.keras.Input((6,)),
            tf.keras.layers.Dense(
                8, activation="relu", kernel_initializer=tf.keras.initializers.GlorotUniform(1)
            ),
            tf.keras.layers.Dense(3, kernel_initializer=tf.keras.initializers.GlorotUniform(2)),
        ]
    )


def tiny_loss():  # noqa: ANN201
    import tensorflow as tf

    return tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _clients() -> list[tuple[int, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    out = []
    for cid, n in ((3, 21), (7, 50)):  # unequal sizes: the weighting matters
        x = rng.normal(size=(n, 6)).astype(np.float32)
        y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 1)
        out.append((cid, x, y))
    return out


def _sequential(start, clients, seeds, epochs, batch):  # noqa: ANN001, ANN202
    import tensorflow as tf

    model = tiny_model()
    model.compile(optimizer=tf.keras.optimizers.Adam(learning_rate=1e-2), loss=tiny_loss())
    models, sizes = [], []
    for (_cid, x, y), seed in zip(clients, seeds):
        model.set_weights(start)
        for variable in model.optimizer.variables:
            variable.assign(tf.zeros_like(variable))
        tf.keras.utils.set_random_seed(seed)
        model.fit(x, y, epochs=epochs, batch_size=batch, shuffle=True, verbose=0)
        models.append(model.get_weights())
        sizes.append(len(y))
    n = np.asarray(sizes, np.float64)
    return [
        sum(k * np.asarray(m[i], np.float64) for k, m in zip(n, models)) / n.sum()
        for i in range(len(start))
    ], models


def test_one_round_equals_sequential_keras() -> None:
    start = [np.asarray(w) for w in tiny_model().get_weights()]
    clients, seeds = _clients(), [11, 12]
    with peer_round.PeerPool(tiny_model, tiny_loss, processes=1, learning_rate=1e-2) as pool:
        averaged = pool.round(start, clients, seeds, epochs=2, batch_size=8)
    expected, models = _sequential(start, clients, seeds, epochs=2, batch=8)
    assert len(averaged) == len(expected)
    for got, want, first, second in zip(averaged, expected, *models):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        # the clients trained apart and the mean weights them by examples (50 vs 21)
        assert not np.allclose(first, second, atol=1e-4)
    moved = max(float(np.max(np.abs(a - s))) for a, s in zip(averaged, start))
    assert moved > 1e-3  # training happened


def test_weighted_average_weights_by_examples() -> None:
    a = [np.zeros((2,), np.float32)]
    b = [np.ones((2,), np.float32)]
    (mean,) = peer_round.weighted_average([a, b], [1, 3])
    np.testing.assert_allclose(mean, [0.75, 0.75])
    assert mean.dtype == np.float32
