"""Masked, proximal, measuring client work: checked against per-client runs and numpy."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from fedprune.data.registry import load_federated
from fedprune.engine.client_work import LocalTraining
from fedprune.engine.process import build_learning_process, with_client_work_state
from fedprune.engine.rounds import run_round
from fedprune.models.spec import ModelSpec

pytestmark = pytest.mark.slow


@pytest.fixture
def setup(fixture_data_dir):
    data = load_federated("uci_har", seed=0, data_dir=fixture_data_dir, verbose=False)
    spec = ModelSpec(data.input_shape, data.num_classes, seed=0)
    init = [np.asarray(w) for w in spec.initial_weights().trainable]
    rng = np.random.default_rng(0)
    mask = [
        (rng.random(w.shape) > 0.7).astype(np.float32) if w.ndim > 1 else np.ones_like(w)
        for w in init
    ]
    masked_init = [w * m for w, m in zip(init, mask)]
    return data, spec, mask, masked_init


def _round(process, weights, mask, anchor, clients):
    state = process.set_model_weights(
        process.initialize(), tff.learning.models.ModelWeights(weights, [])
    )
    state = with_client_work_state(state, mask=mask, anchor=anchor)
    out = run_round(process, state, clients, round_num=1, seed=0, batch_size=8)
    return [np.asarray(w) for w in process.get_model_weights(out.state).trainable], out


def test_masked_weights_stay_exactly_zero(tff_context, setup):
    data, spec, mask, w0 = setup
    process = build_learning_process(spec, LocalTraining(2, prox=0.01, masked=True))
    new, _ = _round(process, w0, mask, w0, data.clients[:3])
    for w, m, w_init in zip(new, mask, w0):
        assert np.all(w[m == 0] == 0.0)
        if w.ndim > 1:  # kernels: every unmasked weight is non-zero and has moved
            assert np.count_nonzero(w[m == 1]) == np.count_nonzero(m)
            assert np.mean(w[m == 1] != w_init[m == 1]) > 0.5


def test_statistics_are_means_over_clients(tff_context, setup):
    data, spec, mask, w0 = setup
    training = LocalTraining(1, prox=0.01, masked=True, statistics=True)
    process = build_learning_process(spec, training)
    clients = data.clients[:3]
    singles = [_round(process, w0, mask, w0, [c]) for c in clients]
    _, together = _round(process, w0, mask, w0, clients)
    stats = together.metrics["client_work"]["statistics"]
    assert int(together.metrics["client_work"]["clients"]) == 3
    per_client_w = [s[0] for s in singles]  # a one-client round returns that client's model
    for i in range(len(w0)):
        ws = np.stack([w[i] for w in per_client_w])
        np.testing.assert_allclose(stats["w"][i], ws.mean(0), atol=1e-5)
        np.testing.assert_allclose(stats["w2"][i], (ws**2).mean(0), atol=1e-5)
        signs = np.stack(
            [s[1].metrics["client_work"]["statistics"]["grad_sign"][i] for s in singles]
        )
        np.testing.assert_allclose(stats["grad_sign"][i], signs.mean(0), atol=1e-6)
        grads = np.stack([s[1].metrics["client_work"]["statistics"]["grad"][i] for s in singles])
        np.testing.assert_allclose(stats["grad"][i], grads.mean(0), atol=1e-6)
    # gradients are taken at the broadcast model, so they exist for masked weights too
    # (regrowth needs them) while the trained models stay masked
    kernel = next(i for i, w in enumerate(w0) if w.ndim > 1)
    assert np.count_nonzero(np.asarray(stats["grad"][kernel])[mask[kernel] == 0]) > 0
    assert np.all(np.asarray(stats["w"][kernel])[mask[kernel] == 0] == 0)


def test_statistics_gradient_is_eq5_over_all_examples_with_dropout_off(tff_context, setup):
    """Reference: Keras on the whole client at once, training=False (no dropout), the mean
    cross entropy plus the gradient lambda (w - anchor) of the proximal term."""
    data, spec, mask, w0 = setup
    prox = 0.5
    anchor = [w + 0.01 for w in w0]
    process = build_learning_process(
        spec, LocalTraining(1, prox=prox, masked=True, statistics=True)
    )
    client = data.clients[0]
    _, out = _round(process, w0, mask, anchor, [client])
    got = out.metrics["client_work"]["statistics"]["grad"]

    model = spec.keras()
    model.set_weights([np.asarray(w) for w in w0])  # every weight of this model is trainable
    x = tf.constant(client.x_train)
    y = tf.constant(client.y_train)
    with tf.GradientTape() as tape:
        loss = spec.loss()(y, model(x, training=False))
    ce = tape.gradient(loss, model.trainable_variables)
    for g, c, w, a in zip(got, ce, w0, anchor):
        np.testing.assert_allclose(g, c.numpy() + prox * (w - a), rtol=1e-4, atol=1e-6)


def test_proximal_term_pulls_towards_anchor(tff_context, setup):
    data, spec, _, w0 = setup
    ones = [np.ones_like(w) for w in w0]
    far = [w + 1.0 for w in w0]

    def distance(prox):
        process = build_learning_process(spec, LocalTraining(2, prox=prox, masked=True))
        new, _ = _round(process, w0, ones, far, data.clients[:2])
        return sum(float(np.sum((n - a) ** 2)) for n, a in zip(new, far))

    assert distance(10.0) < distance(1e-9)
