"""Per-channel input scaling and the decision logit range (edge_export.input_scaling,
edge_export.logit_range, prepare.prepare_for_format)."""

import numpy as np
import pytest
import tensorflow as tf

from edge_export.convert import to_tflite
from edge_export.input_scaling import InputScaling, fold_input_scaling
from edge_export.logit_range import decision_logit_range, logits, with_logit_range
from edge_export.micro import builtin_ops
from edge_export.prepare import prepare_for_format
from edge_export.verify import run_tflite
from fedprune.errors import ConfigError
from fedprune.models.cnn1d import build_har_cnn

# channels with very different spreads and offsets, like body vs total acceleration
SPREAD = np.array([0.1, 0.2, 0.3, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5], np.float32)
OFFSET = np.array([0, 0, 0, 1.0, 0, 0, 0.8, 0, -0.5], np.float32)


@pytest.fixture(scope="module")
def windows():
    rng = np.random.default_rng(0)
    return (rng.normal(size=(40, 128, 9)) * SPREAD + OFFSET).astype(np.float32)


@pytest.fixture(scope="module")
def cnn():
    return build_har_cnn((128, 9), 6, seed=0)


def test_scaling_maps_each_channel_range_with_zero_onto_minus_one_one():
    x = np.array([[[1.0, -4.0, 0.0], [3.0, 2.0, 0.0]]], np.float32)  # channel 0 > 0 only
    scaling = InputScaling.fit(x)
    # channel 0: range [1, 3] extended to [0, 3]; channel 1: [-4, 2]; channel 2 constant 0
    np.testing.assert_allclose(scaling.offset, [1.5, -1.0, 0.0])
    np.testing.assert_allclose(scaling.scale, [1.5, 3.0, 1.0])
    z = scaling.apply(x)
    np.testing.assert_allclose(z[0], [[-1 / 3, -1.0, 0.0], [1.0, 1.0, 0.0]], rtol=1e-6)


def test_scaling_after_standardization_is_one_affine_map_on_raw_values():
    rng = np.random.default_rng(1)
    raw = rng.normal(size=(5, 8, 3)).astype(np.float32) * 3 + 2
    mean, std = raw.mean(axis=(0, 1)), raw.std(axis=(0, 1))
    scaling = InputScaling.fit((raw - mean) / std)
    on_raw = scaling.after(mean, std)
    np.testing.assert_allclose(on_raw.apply(raw), scaling.apply((raw - mean) / std), atol=1e-5)
    assert scaling.after(None, None) is scaling


def _fold_and_compare(model: tf.keras.Model, x: np.ndarray, atol: float) -> tf.keras.Model:
    """Fold the scaling fitted on ``x``; the folded model on scaled ``x`` equals ``model``."""
    scaling = InputScaling.fit(x)
    folded = fold_input_scaling(model, scaling)
    np.testing.assert_allclose(
        folded.predict(scaling.apply(x), verbose=0, batch_size=1),
        model.predict(x, verbose=0),
        atol=atol,
    )
    return folded


def test_folded_conv_model_equals_the_original_in_float(cnn, windows):
    folded = _fold_and_compare(cnn, windows, atol=1e-6)
    # 'same' padding with the channel's zero, not z = 0: the border steps depend on it
    assert [layer.name for layer in folded.layers[1:3]] == ["pad_scaled", "conv1_scaled"]


def test_folded_dense_model_equals_the_original():
    inputs = tf.keras.Input((4,))
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(3, activation="relu")(inputs))
    x = np.random.default_rng(2).normal(size=(10, 4)).astype(np.float32) * [1, 5, 0.1, 2] + 3
    _fold_and_compare(model, x, atol=1e-5)


def test_folding_refuses_a_first_layer_it_cannot_fold():
    inputs = tf.keras.Input((16, 3))
    h = tf.keras.layers.Conv1D(4, 3, strides=2, name="strided")(inputs)
    model = tf.keras.Model(inputs, tf.keras.layers.Flatten()(h))
    with pytest.raises(ConfigError, match="'strided'.*--input-scaling per-tensor"):
        fold_input_scaling(model, InputScaling(np.zeros(3, np.float32), np.ones(3, np.float32)))


def test_folding_refuses_a_branching_model():
    inputs = tf.keras.Input((8,))
    a = tf.keras.layers.Dense(4, name="a")(inputs)
    b = tf.keras.layers.Dense(4, name="b")(inputs)
    model = tf.keras.Model(inputs, tf.keras.layers.Add(name="join")([a, b]))
    with pytest.raises(ConfigError, match="not part of a plain layer chain"):
        fold_input_scaling(model, InputScaling(np.zeros(8, np.float32), np.ones(8, np.float32)))


def test_decision_range_spans_lowest_runner_up_to_highest_winner():
    z = np.array([[10.0, -40.0, 2.0], [-30.0, 4.0, 3.5], [1.0, 0.5, 20.0]])
    # runner-ups 2, 3.5, 1 -> lowest 1; winners 10, 4, 20 -> highest 20; margin 0.1 * 19
    lo, hi = decision_logit_range(z)
    assert lo == pytest.approx(1 - 1.9)
    assert hi == pytest.approx(20 + 1.9)
    with pytest.raises(ConfigError, match="2 class logits"):
        decision_logit_range(np.zeros((3, 1)))


def test_logit_range_keeps_every_class_and_sets_the_int8_logit_scale(cnn, windows):
    z = logits(cnn, windows)
    np.testing.assert_allclose(tf.nn.softmax(z).numpy(), cnn.predict(windows, verbose=0), atol=1e-6)
    lo, hi = decision_logit_range(z)
    clamped = with_logit_range(cnn, lo, hi)
    assert np.array_equal(
        clamped.predict(windows, verbose=0).argmax(-1), cnn.predict(windows, verbose=0).argmax(-1)
    )
    content = to_tflite(clamped, "int8", windows)
    tensors = tf.lite.Interpreter(model_content=content).get_tensor_details()
    # the last Dense layer's output (its kernel and bias have their own scales)
    scales = [t["quantization"][0] for t in tensors if t["name"].endswith("logits/BiasAdd")]
    assert scales and np.allclose(scales, (hi - lo) / 255, rtol=1e-4)


def test_logit_range_needs_a_softmax_head_and_zero_inside():
    inputs = tf.keras.Input((4,))
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(3, name="linear")(inputs))
    with pytest.raises(ConfigError, match="'linear'.*--logit-range full"):
        with_logit_range(model, -1.0, 1.0)
    with pytest.raises(ConfigError, match="must contain 0"):
        with_logit_range(build_har_cnn((128, 9), 6, seed=0), 1.0, 5.0)


def test_prepared_int8_model_runs_on_scaled_windows_with_concatenation(cnn, windows):
    prepared = prepare_for_format(cnn, "int8", windows)
    assert prepared.scaling is not None and prepared.logit_range is not None
    content = to_tflite(prepared.model, "int8", prepared.inputs(windows))
    assert "CONCATENATION" in builtin_ops(content)
    probs, _ = run_tflite(content, prepared.inputs(windows))
    agreement = np.mean(probs.argmax(-1) == cnn.predict(windows, verbose=0).argmax(-1))
    assert agreement >= 0.9
    # float formats and the -qat path convert the model unchanged
    assert prepare_for_format(cnn, "float32", windows).model is cnn
    plain = prepare_for_format(cnn, "int8", windows, "per-tensor", "full")
    assert plain.model is cnn and plain.scaling is None
    with pytest.raises(ConfigError, match="--input-scaling"):
        prepare_for_format(cnn, "int8", windows, "per-row")
