import numpy as np
import pytest
import tensorflow as tf
import tensorflow_model_optimization as tfmot

from fedprune.models.cnn1d import build_har_cnn
from fedprune.sparsity.layers import dense_layers, prunable_mask_flags


def test_har_cnn_kernels_prunable_biases_dense():
    model = build_har_cnn((128, 9))
    flags = prunable_mask_flags(model)
    assert flags == [True, False] * 4
    prunable = sum(w.shape.num_elements() for w, f in zip(model.trainable_weights, flags) if f)
    assert prunable == 89_254 - 166


def _flags_by_weight(model: tf.keras.Model) -> dict[str, bool]:
    return {w.name: f for w, f in zip(model.trainable_weights, prunable_mask_flags(model))}


def test_tfmot_registry_decides_prunable_weights_and_the_rest_stays_dense():
    inputs = tf.keras.Input((16, 3))
    h = tf.keras.layers.SeparableConv1D(4, 3, name="sep")(inputs)
    h = tf.keras.layers.LayerNormalization(name="norm")(h)
    h = tf.keras.layers.GlobalAveragePooling1D(name="gap")(h)
    out = tf.keras.layers.Dense(2, activation="softmax", name="probs")(h)
    model = tf.keras.Model(inputs, out)
    flags = _flags_by_weight(model)
    prunable = sorted(n.split(":")[0] for n, f in flags.items() if f)
    # tfmot prunes SeparableConv's pointwise kernel only, and Dense kernels
    assert prunable == ["probs/kernel", "sep/pointwise_kernel"]
    assert len(flags) == 7  # depthwise, pointwise, bias; gamma, beta; kernel, bias
    assert dense_layers(model) == ["norm"]


def test_recurrent_cells_follow_tfmot():
    inputs = tf.keras.Input((4, 2))
    out = tf.keras.layers.LSTM(3, name="rnn")(inputs)
    flags = _flags_by_weight(tf.keras.Model(inputs, out))
    assert [n.split("/")[-1].split(":")[0] for n, f in flags.items() if f] == [
        "kernel",
        "recurrent_kernel",
    ]


class _Scale(tf.keras.layers.Layer):
    """A custom layer with one weight, unknown to tfmot's registry."""

    def build(self, shape: tf.TensorShape) -> None:
        self.w = self.add_weight("w", shape=(shape[-1],), initializer="ones")

    def call(self, x: tf.Tensor) -> tf.Tensor:
        return x * self.w


class _PrunableScale(_Scale, tfmot.sparsity.keras.PrunableLayer):
    def get_prunable_weights(self) -> list:
        return [self.w]


def test_custom_layers_are_dense_unless_they_are_prunable_layers():
    inputs = tf.keras.Input((3,))
    h = _Scale(name="plain")(inputs)
    out = _PrunableScale(name="mine")(h)
    model = tf.keras.Model(inputs, out)
    assert prunable_mask_flags(model) == [False, True]
    assert dense_layers(model) == ["plain"]


def test_select_then_merge_round_trips_and_fills_ones():
    from fedprune.sparsity.layers import merge, select

    like = [np.zeros((2, 3)), np.zeros(3), np.zeros((3, 1)), np.zeros(1)]
    flags = [True, False, True, False]
    masks = [np.array([[1, 0, 1], [0, 0, 1]], np.float32), np.array([[0], [1], [1]], np.float32)]
    merged = merge(masks, like, flags)
    assert [m.shape for m in merged] == [w.shape for w in like]
    assert merged[1].dtype == np.float32 and np.all(merged[1] == 1) and np.all(merged[3] == 1)
    assert all(a is b for a, b in zip(select(merged, flags), masks))
    values = [np.full((2,), k) for k in range(4)]
    assert [int(v[0]) for v in select(values, flags)] == [0, 2]


def test_select_and_merge_refuse_mismatched_lengths():
    from fedprune.sparsity.layers import merge, select

    with pytest.raises(ValueError, match="3 values but 2 flags"):
        select([np.ones(1)] * 3, [True, False])
    with pytest.raises(ValueError, match="1 masks for 2 kernels"):
        merge([np.ones(1)], [np.ones(1)] * 2, [True, True])


def test_kernel_flags_of_a_spec_are_the_har_cnn_weights_of_rank_above_one():
    from fedprune.models.spec import AutoencoderSpec, ModelSpec
    from fedprune.sparsity.layers import kernel_flags

    spec = ModelSpec((128, 9), 6, seed=0)
    weights = spec.keras().get_weights()
    assert kernel_flags(spec) == [w.ndim > 1 for w in weights] == [True, False] * 4
    assert kernel_flags(spec) is not kernel_flags(spec)  # callers may modify their copy
    assert kernel_flags(AutoencoderSpec(784, seed=0)) == [True, False] * 6
