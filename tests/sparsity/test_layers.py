import numpy as np
import pytest
import tensorflow as tf

from fedprune.models.cnn1d import build_har_cnn
from fedprune.sparsity.layers import prunable_mask_flags


def test_har_cnn_kernels_prunable_biases_dense():
    model = build_har_cnn((128, 9))
    flags = prunable_mask_flags(model)
    assert flags == [True, False] * 4
    prunable = sum(w.shape.num_elements() for w, f in zip(model.trainable_weights, flags) if f)
    assert prunable == 89_254 - 166


def test_unknown_layer_with_weights_is_named():
    inputs = tf.keras.Input((4, 2))
    out = tf.keras.layers.LSTM(3, name="rnn")(inputs)
    with pytest.raises(ValueError, match="'rnn' \\(LSTM\\)"):
        prunable_mask_flags(tf.keras.Model(inputs, out))


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
