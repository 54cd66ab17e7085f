"""Stacked training in groups of clients: each client trains as in one stack of all clients,
its state held compactly between groups (fedprune.engine.stacked, "Many clients")."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from fedprune.engine.stacked import (
    MIN_GROUP,
    StackedModel,
    activation_bytes,
    group_size,
    predict_each,
)
from fedprune.models.cnn1d import build_har_cnn

SHAPE = (16, 3)
CLASSES = 4


def _clients(k: int, seed: int = 0) -> tuple[list, list, list, list]:
    """k clients of different sizes: start weights, kernel masks (two distinct masks, given
    as separate arrays per client), training windows and labels."""
    rng = np.random.default_rng(seed)
    weights = [build_har_cnn(SHAPE, CLASSES, seed=c).get_weights() for c in range(k)]
    shared = [
        [(rng.random(w.shape) > 0.5).astype(np.float32) for w in weights[0] if w.ndim > 1]
        for _ in range(2)
    ]
    masks = [[m.copy() for m in shared[c % 2]] for c in range(k)]
    sizes = rng.integers(3, 15, k)
    xs = [rng.normal(size=(n, *SHAPE)).astype(np.float32) for n in sizes]
    ys = [rng.integers(0, CLASSES, n) for n in sizes]
    return weights, masks, xs, ys


def _train(group: int | None, k: int = 5, calls: tuple[int, ...] = (2,)) -> StackedModel:
    weights, masks, xs, ys = _clients(k)
    stack = StackedModel(
        build_har_cnn(SHAPE, CLASSES), weights, masks, [3 * c + 1 for c in range(k)], group=group
    )
    shuffles = [np.random.default_rng(c) for c in range(k)]
    for epochs in calls:
        stack.fit_epochs(xs, ys, epochs, 4, shuffles)
    return stack


def test_groups_train_each_client_as_one_stack_of_all_does():
    """Groups of 2 (the last one padded) against one stack of all 5 clients, with dropout,
    shuffling and masks: the same up to float round-off (elementwise kernels take other
    vector paths at other sizes, about 1e-7 here)."""
    whole, grouped = _train(None), _train(2)
    assert whole.group == 5 and grouped.group == 2
    _, masks, _, _ = _clients(5)
    for c in range(5):
        for a, b in zip(whole.client_weights(c), grouped.client_weights(c)):
            np.testing.assert_allclose(a, b, atol=1e-5)
        kernels = [w for w in grouped.client_weights(c) if w.ndim > 1]
        for kernel, mask in zip(kernels, masks[c]):
            assert np.all(kernel[mask == 0] == 0)


@pytest.mark.parametrize("group", [None, 2])
def test_training_in_two_calls_equals_one_call(group):
    """The Adam moments and step counts kept between calls (of the kept weights only) carry
    the training on exactly: 1 + 1 epochs give the weights of 2."""
    once, twice = _train(group, calls=(2,)), _train(group, calls=(1, 1))
    for c in range(5):
        for a, b in zip(once.client_weights(c), twice.client_weights(c)):
            np.testing.assert_array_equal(a, b)


def test_one_client_per_group_trains_as_keras_fit():
    """Three clients in groups of one (every epoch loads and stores each client's state),
    dropout off, no shuffle: each client's weights are Keras ``fit``'s under its mask."""
    weights, masks, xs, ys = _clients(3)

    def no_dropout(model: tf.keras.Model) -> tf.keras.Model:
        for layer in model.layers:
            if isinstance(layer, tf.keras.layers.Dropout):
                layer.rate = 0.0
        return model

    stack = StackedModel(
        no_dropout(build_har_cnn(SHAPE, CLASSES)), weights, masks, learning_rate=0.01, group=1
    )
    stack.fit_epochs(xs, ys, epochs=2, batch_size=4, shuffle_rngs=None)
    for c in range(3):
        model = no_dropout(build_har_cnn(SHAPE, CLASSES, masked=True))
        kernels = [layer for layer in model.layers if hasattr(layer, "kernel")]
        full = []
        for layer, mask in zip(kernels, masks[c]):
            layer.kernel_constraint.mask.assign(mask)
            full += [mask, np.ones(mask.shape[-1], np.float32)]
        model.set_weights([w * m for w, m in zip(weights[c], full)])
        model.compile(tf.keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy")
        model.fit(xs[c], ys[c], batch_size=4, epochs=2, shuffle=False, verbose=0)
        for got, want in zip(stack.client_weights(c), model.get_weights()):
            np.testing.assert_allclose(got, want, atol=2e-5)


def test_handed_out_weights_keep_their_values_when_training_continues():
    stack = _train(2, calls=(1,))
    before = stack.client_weights(3)
    saved = [w.copy() for w in before]
    with pytest.raises(ValueError, match="read-only"):
        before[0][...] = 0.0
    _, _, xs, ys = _clients(5)
    stack.fit_epochs(xs, ys, 1, 4, [np.random.default_rng(9 + c) for c in range(5)])
    for w, s in zip(before, saved):
        np.testing.assert_array_equal(w, s)
    assert not np.array_equal(stack.client_weights(3)[0], saved[0])


def test_state_is_the_weights_and_the_moments_of_kept_weights():
    """Masks equal in content are held once; the moments only for the weights a mask keeps."""
    k = 6
    stack = _train(4, k=k, calls=(1,))
    weights, masks, _, _ = _clients(k)
    assert stack.distinct_masks == 2
    params = sum(w.size for w in weights[0])
    kernels = sum(w.size for w in weights[0] if w.ndim > 1)
    kept = [params - kernels + sum(int(m.sum()) for m in masks[c]) for c in range(k)]
    expected = 4 * (k * params + 2 * sum(kept) + 2 * params) + 8 * sum(kept[:2]) + 16 * k
    assert stack.state_bytes == expected
    assert 2 * 4 * sum(kept) < 2 * 4 * k * params * 0.75  # half the kernels pruned


def test_predictions_in_groups_are_each_clients_own_model():
    stack = _train(2)
    rng = np.random.default_rng(5)
    tests = [rng.normal(size=(n, *SHAPE)).astype(np.float32) for n in (3, 9, 1, 4, 6)]
    probs = predict_each(stack, tests)
    model = build_har_cnn(SHAPE, CLASSES)
    for c, (x, p) in enumerate(zip(tests, probs)):
        model.set_weights(stack.client_weights(c))
        np.testing.assert_allclose(p, model(x, training=False).numpy(), atol=1e-5)


def test_progress_reports_each_groups_share_of_an_epoch():
    weights, masks, xs, ys = _clients(5)
    stack = StackedModel(build_har_cnn(SHAPE, CLASSES), weights, masks, group=2)
    parts, epochs = [], []
    stack.fit_epochs(xs, ys, 3, 4, None, lambda: epochs.append(1), parts.append)
    assert len(epochs) == 3 and len(parts) == 9  # three groups of 2, 2 and 1 clients
    assert sum(parts) == pytest.approx(3.0)


def test_group_size_follows_the_activation_budget_within_its_bounds():
    model = build_har_cnn(SHAPE, CLASSES)
    per_client = activation_bytes(model)
    assert group_size(model, 3) == 3  # never more than the clients
    assert group_size(model, 10**6, budget=per_client) == MIN_GROUP
    assert group_size(model, 10**6, budget=(MIN_GROUP + 10) * per_client) == MIN_GROUP + 10
    weights = _clients(MIN_GROUP, seed=1)[0]
    assert StackedModel(model, weights).group == MIN_GROUP  # the built-in datasets: one group
    with pytest.raises(ValueError, match="group must be >= 1"):
        StackedModel(model, weights, group=0)


def test_a_mask_of_the_wrong_size_is_named():
    weights, masks, _, _ = _clients(2)
    masks[1][0] = masks[1][0][:2]
    with pytest.raises(ValueError, match="client 1: kernel mask 0"):
        StackedModel(build_har_cnn(SHAPE, CLASSES), weights, masks)


def test_weights_of_another_shape_are_named():
    weights, _, _, _ = _clients(2)
    weights[1] = [w[..., :1] if w.ndim > 1 else w for w in weights[1]]
    with pytest.raises(ValueError, match="client 1: weight shapes"):
        StackedModel(build_har_cnn(SHAPE, CLASSES), weights)
