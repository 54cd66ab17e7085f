"""Activation equalization (edge_export.equalize) and the per-client choice of an int8
preparation on held-out training windows (edge_export.calibration)."""

import numpy as np
import pytest
import tensorflow as tf

from edge_export.calibration import (
    NEAR_TIE,
    available,
    choose,
    held_out_split,
    margin_rms,
    prepare_candidate,
)
from edge_export.equalize import equalizable_pair, equalize, unit_scales
from fedprune.errors import ConfigError
from fedprune.models.cnn1d import build_har_cnn


@pytest.fixture(scope="module")
def windows():
    rng = np.random.default_rng(0)
    return rng.normal(size=(30, 128, 9)).astype(np.float32)


@pytest.fixture(scope="module")
def cnn():
    model = build_har_cnn((128, 9), 6, seed=0)
    # a pruned-looking kernel: whole zero blocks must stay zero
    kernel, bias = model.get_layer("dense").get_weights()
    kernel[:, :8] = 0.0
    model.get_layer("dense").set_weights([kernel, bias + 0.05])
    return model


def test_unit_scales_by_hand():
    hidden = np.array([[1.0, 0.0, 4.0], [2.0, 0.0, 1.0]])  # r = [2, 0, 4], R = 4
    np.testing.assert_allclose(unit_scales(hidden, 1.0), [2.0, 1.0, 1.0])
    np.testing.assert_allclose(unit_scales(hidden, 0.5), [np.sqrt(2.0), 1.0, 1.0], rtol=1e-6)
    np.testing.assert_allclose(unit_scales(np.zeros((3, 2)), 1.0), [1.0, 1.0])


@pytest.mark.parametrize("power", [1.0, 0.5])
def test_equalization_is_exact_in_float_and_keeps_pruned_zeros(cnn, windows, power):
    equal = equalize(cnn, windows, power)
    np.testing.assert_allclose(
        equal.predict(windows, verbose=0), cnn.predict(windows, verbose=0), atol=1e-5
    )
    kernel = equal.get_layer("dense").get_weights()[0]
    assert not kernel[:, :8].any()

    # unit j's largest output r_j becomes r_j^(1 - p) R^p: with p = 1 every live unit
    # reaches R, with p = 1/2 the smallest-to-largest ratio is the square root of before
    def peaks(model: tf.keras.Model) -> np.ndarray:
        hidden = tf.keras.Model(model.inputs[0], model.get_layer("dense").output)
        return hidden.predict(windows, verbose=0).max(axis=0)

    before, after = peaks(cnn), peaks(equal)
    live = before > 0
    ratio_before = before[live].min() / before[live].max()
    ratio_after = after[live].min() / after[live].max()
    assert ratio_before < 0.5  # the check below is not trivially true
    assert ratio_after == pytest.approx(ratio_before ** (1.0 - power), rel=1e-3)


def test_a_model_without_a_relu_dense_before_its_output_has_only_the_plain_candidate():
    inputs = tf.keras.Input((16, 3))
    h = tf.keras.layers.Flatten()(inputs)
    outputs = tf.keras.layers.Dense(4, activation="softmax")(h)
    model = tf.keras.Model(inputs, outputs)
    assert equalizable_pair(model) is None
    assert available(model) == ["plain"]
    x = np.random.default_rng(1).normal(size=(10, 16, 3)).astype(np.float32)
    assert choose(model, "int8", x, seed=0) == ("plain", {})


def test_held_out_split_is_a_seeded_partition_of_a_fifth():
    fit, check = held_out_split(23, seed=4)
    assert len(check) == 5 and len(fit) == 18
    assert sorted([*fit, *check]) == list(range(23))
    again = held_out_split(23, seed=4)
    np.testing.assert_array_equal(fit, again[0])
    assert not np.array_equal(check, held_out_split(23, seed=5)[1])
    assert [len(part) for part in held_out_split(2, seed=0)] == [1, 1]
    with pytest.raises(ConfigError, match=">= 2 training windows"):
        held_out_split(1, seed=0)


def test_margin_error_by_hand_over_near_ties_only():
    keras = np.array([[0.5, 0.4, 0.1], [0.99, 0.001, 0.009]])
    int8 = np.array([[0.4, 0.5, 0.1], [0.5, 0.25, 0.25]])
    # row 0: Keras margin log(0.5/0.4) = 0.2231, the file's log(0.4/0.5) = -0.2231;
    # row 1: Keras margin log(0.99/0.009) = 4.70 > NEAR_TIE, not counted
    assert np.log(0.99 / 0.009) > NEAR_TIE
    assert margin_rms(keras, int8) == pytest.approx(2 * np.log(0.5 / 0.4), rel=1e-6)
    assert margin_rms(keras[1:], int8[1:]) == 0.0
    # an int8 probability of 0 is read as one output step, not log(0)
    assert np.isfinite(margin_rms(np.array([[0.6, 0.4]]), np.array([[1.0, 0.0]])))


def test_choice_measures_every_candidate_and_its_file_matches_keras(cnn, windows):
    best, measured = choose(cnn, "int8", windows, seed=3)
    assert set(measured) == {"plain", "equalized", "half-equalized"}
    assert best == min(measured, key=lambda n: measured[n].key())
    assert all(m.flipped <= 6 for m in measured.values())  # six held-out windows
    prepared = prepare_candidate(cnn, best, "int8", windows)
    np.testing.assert_allclose(
        prepared.model.predict(prepared.inputs(windows), verbose=0),
        cnn.predict(windows, verbose=0),
        atol=2e-2,  # the decision logit range clamps only far-off logits
    )
