"""The in-graph local loop: every example once per epoch, a fresh seeded shuffle per epoch,
batches cut as ``Dataset.shuffle(n).batch(B)`` cuts them; dropout from the step's seed."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from fedprune.engine import local_loop, step_noise


def _visits(n: int, batch: int, epochs: int, seed: int, repeats: int = 1) -> list[np.ndarray]:
    """The example indices of every batch, in order (x holds each example's index)."""
    x = np.arange(n, dtype=np.float32).reshape(n, 1)
    data = local_loop.unpack(local_loop.tensors(x, np.arange(n), batch, seed, repeats))
    cap = epochs * repeats * (-(-n // batch))

    def step(state, pair):  # noqa: ANN001
        i, arr = state
        return i + 1, arr.write(i, pair[0][:, 0])

    @tf.function
    def run():  # noqa: ANN202
        visited = tf.TensorArray(tf.float32, size=cap, infer_shape=False)
        _, arr = local_loop.run_epochs(data, epochs, step, (0, visited))
        return [arr.read(i) for i in range(cap)]

    return [b.numpy().astype(int) for b in run()]


def test_each_epoch_visits_every_example_once_in_batches_with_a_partial_last_one():
    batches = _visits(10, 4, epochs=3, seed=7)
    assert [len(b) for b in batches] == [4, 4, 2] * 3
    epochs = [np.concatenate(batches[i : i + 3]) for i in (0, 3, 6)]
    for order in epochs:
        assert sorted(order) == list(range(10))
    assert not np.array_equal(epochs[0], epochs[1])  # reshuffled every epoch


def test_the_shuffle_is_a_function_of_the_seed_and_repeats_multiply_epochs():
    a, b = _visits(10, 4, 2, seed=7), _visits(10, 4, 2, seed=7)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, _visits(10, 4, 2, seed=8)))
    assert len(_visits(10, 4, 1, seed=7, repeats=3)) == 9
    # epoch e draws (seed, e): one repeated epoch is the next epoch of a longer run
    assert all(np.array_equal(x, y) for x, y in zip(_visits(10, 4, 1, 7, 2), a))


def test_chunks_cover_the_examples_in_order():
    x = np.arange(7, dtype=np.float32).reshape(7, 1)
    data = local_loop.unpack(local_loop.tensors(x, np.zeros(7, np.int64), 2, 0))

    def add(state, pair):  # noqa: ANN001
        total, count = state
        return total + tf.reduce_sum(pair[0]), count + 1

    total, chunks = tf.function(lambda: local_loop.run_chunks(data, 3, add, (0.0, 0)))()
    assert float(total) == 21.0 and int(chunks) == 3


def test_bad_client_values_are_refused():
    with pytest.raises(ValueError, match="batch size and repeats"):
        local_loop.tensors(np.zeros((2, 1)), np.zeros(2), 0, 0)
    with pytest.raises(ValueError, match="as many targets"):
        local_loop.tensors(np.zeros((2, 1)), np.zeros(3), 1, 0)


def test_dropout_is_a_function_of_the_step_seed_and_refused_outside_a_step():
    inputs = tf.keras.Input((64,))
    model = step_noise.seed_random_layers(
        tf.keras.Model(inputs, tf.keras.layers.Dropout(0.5)(inputs))
    )
    ones = tf.ones((1, 64))

    @tf.function
    def masked(seed):  # noqa: ANN001
        with step_noise.seeded(seed):
            return model(ones, training=True)

    a = masked(step_noise.step_seed(3, 0, 0))
    assert np.array_equal(a, masked(step_noise.step_seed(3, 0, 0)))
    assert not np.array_equal(a, masked(step_noise.step_seed(3, 0, 1)))
    assert np.array_equal(model(ones, training=False), ones)  # inference draws nothing
    with pytest.raises(RuntimeError, match="outside a training step"):
        model(ones, training=True)
