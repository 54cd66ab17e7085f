"""Your own model and data through the API: checked before anything is made, recorded in
the run directory, and refused on resume when they differ."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

import fedprune as fp
from fedprune.errors import ConfigError, DataError
from tests.api.test_builders import windows

L = tf.keras.layers


def small(input_shape, num_classes):
    inputs = tf.keras.Input(shape=input_shape)
    h = L.Conv1D(4, 3, activation="relu", name="conv")(inputs)
    h = L.LayerNormalization(name="norm")(h)
    h = L.GlobalAveragePooling1D(name="gap")(h)
    return tf.keras.Model(inputs, L.Dense(num_classes, activation="softmax", name="probs")(h))


def with_batchnorm(input_shape, num_classes):
    inputs = tf.keras.Input(shape=input_shape)
    h = L.BatchNormalization(name="bn")(L.Flatten()(inputs))
    return tf.keras.Model(inputs, L.Dense(num_classes, activation="softmax")(h))


def logits_out(input_shape, num_classes):
    inputs = tf.keras.Input(shape=input_shape)
    return tf.keras.Model(inputs, L.Dense(num_classes)(L.Flatten()(inputs)))


def three_classes(input_shape, num_classes):
    inputs = tf.keras.Input(shape=input_shape)
    return tf.keras.Model(inputs, L.Dense(3, activation="softmax")(L.Flatten()(inputs)))


def fixed_input(input_shape, num_classes):
    inputs = tf.keras.Input(shape=(8, 2))
    return tf.keras.Model(inputs, L.Dense(num_classes, activation="softmax")(L.Flatten()(inputs)))


def not_a_model(input_shape, num_classes):
    return "model"


def with_lambda(input_shape, num_classes):
    inputs = tf.keras.Input(shape=input_shape)
    h = L.Lambda(lambda t: t * 2.0, name="double")(L.Flatten()(inputs))
    return tf.keras.Model(inputs, L.Dense(num_classes, activation="softmax")(h))


class Unregistered(L.Layer):
    """A custom layer Keras does not know by name (not registered)."""

    def call(self, inputs):
        return inputs * 2.0


def with_unregistered_layer(input_shape, num_classes):
    inputs = tf.keras.Input(shape=input_shape)
    h = Unregistered(name="twice")(L.Flatten()(inputs))
    return tf.keras.Model(inputs, L.Dense(num_classes, activation="softmax")(h))


def nan_initial_weights(input_shape, num_classes):
    inputs = tf.keras.Input(shape=input_shape)
    nan = tf.keras.initializers.Constant(float("nan"))
    out = L.Dense(num_classes, activation="softmax", kernel_initializer=nan, name="probs")
    return tf.keras.Model(inputs, out(L.Flatten()(inputs)))


@pytest.mark.slow
@pytest.mark.parametrize(
    "model_fn, message",
    [
        (with_batchnorm, "bn keep non-trainable state .*LayerNormalization"),
        (logits_out, "do not sum to 1"),
        (three_classes, "output shape .* 2 classes"),
        (fixed_input, "input shape .* \\(16, 2\\)"),
        (not_a_model, "returned str, not a tf.keras.Model"),
        (with_lambda, "double are Lambda layers, which Keras cannot rebuild .*registered with"),
        (with_unregistered_layer, "cannot rebuild it from its architecture .*register"),
        (nan_initial_weights, "layer probs.s initial weight kernel holds 64 non-finite"),
    ],
)
def test_a_bad_model_is_one_error_and_leaves_nothing(model_fn, message, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(ConfigError, match=message):
        fp.fedavg(windows(), model_fn=model_fn, rounds=1, clients_per_round=2).run(
            out, progress=False
        )
    assert not out.exists()


@pytest.mark.slow
def test_your_model_and_data_are_recorded_and_other_data_is_refused(tmp_path):
    out = tmp_path / "run"
    data = windows()
    result = fp.fedavg(data, model_fn=small, rounds=2, clients_per_round=2).run(out, progress=False)
    summary = result.summary
    assert summary["dense_layers"] == ["norm"]
    config = json.loads((out / "config.json").read_text())
    assert config["model"] == "user:small" and config["dataset"] == "dataset.npz"  # its own
    assert (out / "model.json").exists()
    models = result.models()
    assert sorted(models) == [0, 1, 2]
    x = data.x[:5]
    np.testing.assert_allclose(  # the global model's predictions, rebuilt from model.json
        models[0].predict(x, verbose=0), models[2].predict(x, verbose=0), rtol=1e-6
    )
    again = fp.fedavg(data, model_fn=small, rounds=2, clients_per_round=2).run(out, progress=False)
    assert again.summary == summary
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(DataError, match="holds a run trained on other data"):
        fp.fedavg(windows(seed=1), model_fn=small, rounds=2, clients_per_round=2).run(out)
    assert sorted(p.name for p in out.iterdir()) == before


@pytest.mark.slow
def test_a_refused_start_removes_the_data_it_placed(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(ConfigError, match="^clients_per_round must be at most 3"):
        fp.fedavg(windows(), model_fn=small, rounds=1, clients_per_round=4).run(out)
    assert not out.exists()
    fp.fedavg(windows(seed=2), model_fn=small, rounds=1, clients_per_round=3).run(
        out, progress=False
    )
    assert (out / "summary.json").exists()


def test_a_run_of_your_model_resumes_only_with_that_model(tmp_path):
    from fedprune.models.user import UserModel, resolve

    with pytest.raises(ConfigError, match="names model 'user:small' but model_fn is 'user:other'"):
        resolve("user:small", UserModel(small, "other"), tmp_path)
    with pytest.raises(DataError, match="model.json: cannot read .* pass the same model_fn"):
        resolve("user:small", None, tmp_path)
    assert resolve("har_cnn", None, tmp_path) == "har_cnn"


def autoencoder(input_dim):
    inputs = tf.keras.Input(shape=(input_dim,))
    code = L.Dense(4, activation="relu", name="code")(inputs)
    return tf.keras.Model(inputs, L.Dense(input_dim, activation="sigmoid", name="out")(code))


@pytest.mark.slow
def test_fedcref_on_your_table_with_your_autoencoder_exports(tmp_path):
    from edge_export.cli import main as edge_export
    from tests.algorithms.test_fedcref_own_data import FAST, blob_table

    options = {**FAST, "theta": 1.0}  # every pair associated: communities certainly form
    result = fp.fedcref(blob_table(per_class=20), model_fn=autoencoder, **options).run(
        tmp_path / "run", progress=False
    )
    assert result.summary["communities"] >= 1
    assert result.config["model"] == "user:autoencoder"
    assert sorted(result.assignments()) == [10, 11, 12, 13]  # your ids, an array each
    assert result.summary["client_ids"] == [10, 11, 12, 13]
    out = tmp_path / "export"
    assert edge_export([str(tmp_path / "run"), "--out", str(out), "--formats", "float32"]) == 0
    report = json.loads((out / "export_report.json").read_text())
    assert report and all(e["format"] == "float32" for e in report)
