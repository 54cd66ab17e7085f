"""FLOP counts against hand-computed products of the layer shapes."""

import tensorflow as tf

from fedprune.models import flops
from fedprune.models.spec import ModelSpec


def test_har_cnn_counts_each_product_once_per_output():
    model = ModelSpec((128, 9), 6, seed=0).keras()
    conv1 = 128 * 64 * (5 * 9)  # same padding: 128 outputs of 64 filters over a 5x9 patch
    conv2 = 64 * 64 * (5 * 64)  # after pooling to 64 steps
    dense = 32 * 2048
    probs = 6 * 32
    counted = flops.count(model)
    assert counted.forward == 2 * (conv1 + conv2 + dense + probs) == 3_490_176
    assert counted.training == 3 * counted.forward
    assert counted.uncounted == ()


def test_conv2d_and_dense_on_a_sequence_and_uncounted_layers_named():
    inputs = tf.keras.Input((8, 8, 3))
    h = tf.keras.layers.Conv2D(4, 3, padding="valid")(inputs)  # 6x6x4, 3x3x3 patches
    h = tf.keras.layers.Reshape((36, 4))(h)
    h = tf.keras.layers.Dense(5)(h)  # applied at each of 36 positions
    h = tf.keras.layers.LayerNormalization(name="norm")(h)
    h = tf.keras.layers.Reshape((36, 5, 1))(h)
    h = tf.keras.layers.Conv2DTranspose(1, 2, name="up")(h)  # not modelled: named
    model = tf.keras.Model(inputs, h)
    counted = flops.count(model)
    assert counted.forward == 2 * (6 * 6 * 4 * 27 + 36 * 5 * 4)
    assert counted.uncounted == ("norm", "up")
