"""Eq. 1 and Eq. 5 on one batch, against numpy computed from the model's own weights."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from fedprune.engine.objectives import local_loss, proximal_objective, proximal_term


def _softmax_model():
    """x [b, 4] -> Dense(3, softmax): no dropout, so the forward pass is deterministic."""
    inputs = tf.keras.Input((4,))
    outputs = tf.keras.layers.Dense(
        3, activation="softmax", kernel_initializer=tf.keras.initializers.GlorotUniform(7)
    )(inputs)
    keras = tf.keras.Model(inputs, outputs)
    keras.layers[1].bias.assign([0.1, -0.2, 0.3])
    spec = (tf.TensorSpec([None, 4], tf.float32), tf.TensorSpec([None], tf.int64))
    model = tff.learning.models.from_keras_model(
        keras, loss=tf.keras.losses.SparseCategoricalCrossentropy(), input_spec=spec
    )
    return model, keras


@pytest.fixture
def batch():
    rng = np.random.default_rng(0)
    return rng.normal(size=(5, 4)).astype(np.float32), np.array([0, 2, 1, 2, 0], np.int64)


def _numpy_cross_entropy(keras, x, y):
    kernel, bias = (w.astype(np.float64) for w in keras.get_weights())
    logits = x.astype(np.float64) @ kernel + bias
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return -np.mean(logp[np.arange(len(y)), y])


def test_local_loss_is_the_batch_mean_cross_entropy(batch):
    model, keras = _softmax_model()
    out, loss = local_loss(model, batch)
    np.testing.assert_allclose(float(loss), _numpy_cross_entropy(keras, *batch), rtol=1e-5)
    assert out.predictions.shape == (5, 3)


def test_proximal_term_by_hand():
    weights = [tf.constant([1.0, 2.0]), tf.constant([[3.0]])]
    anchor = [tf.constant([0.0, 4.0]), tf.constant([[1.0]])]
    # lambda / 2 * (1 + 4 + 4) with lambda = 0.1
    np.testing.assert_allclose(float(proximal_term(weights, anchor, 0.1)), 0.45, rtol=1e-6)


def test_proximal_objective_adds_the_term_to_eq1_and_is_eq1_without_anchor(batch):
    model, keras = _softmax_model()
    trainable = model.trainable_variables
    anchor = [tf.zeros_like(v) for v in trainable]
    squares = sum(float(np.sum(np.square(w.astype(np.float64)))) for w in keras.get_weights())
    _, loss = proximal_objective(model, batch, trainable, anchor, 0.5)
    expected = _numpy_cross_entropy(keras, *batch) + 0.25 * squares
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
    _, plain = proximal_objective(model, batch, trainable, None, 0.5)
    np.testing.assert_allclose(float(plain), _numpy_cross_entropy(keras, *batch), rtol=1e-5)
