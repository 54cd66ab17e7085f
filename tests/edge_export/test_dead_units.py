"""A personal model with a layer that is zero on every training window (dead units): the
export finds the layer, and explains why LiteRT's default XNNPACK delegate refuses the int8
file (the layer's requantization scale is at XNNPACK's limit or above)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from edge_export.convert import to_tflite
from edge_export.export import device_notes, zero_layer_notes
from edge_export.requantization import XNNPACK_LIMIT, largest
from edge_export.verify import device_run
from edge_export.zero_layers import first_zero_layer


def _model(dead: bool) -> tf.keras.Model:
    """Window (20, 3) -> Conv1D 4 -> Flatten -> Dense 5 (ReLU) -> Dense 3 softmax; with
    ``dead``, the hidden dense layer's bias is -1000, so its ReLU is 0 on every window."""
    tf.keras.utils.set_random_seed(3)
    model = tf.keras.Sequential(
        [
            tf.keras.Input((20, 3)),
            tf.keras.layers.Conv1D(4, 3, activation="relu", name="conv"),
            tf.keras.layers.Flatten(name="flat"),
            tf.keras.layers.Dense(5, activation="relu", name="hidden"),
            tf.keras.layers.Dense(3, activation="softmax", name="probs"),
        ]
    )
    if dead:
        kernel, bias = model.get_layer("hidden").get_weights()
        model.get_layer("hidden").set_weights([kernel, np.full_like(bias, -1000.0)])
    return model


@pytest.fixture(scope="module")
def windows() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(64, 20, 3)).astype(np.float32)


@pytest.mark.parametrize("dead", [False, True])
def test_the_first_layer_zero_on_every_window_is_found(windows, dead: bool) -> None:
    found = first_zero_layer(_model(dead), windows)
    if dead:
        assert found is not None and (found.layer, found.units) == ("hidden", 5)
    else:
        assert found is None


def test_a_dead_layer_gives_the_int8_file_a_requantization_scale_xnnpack_refuses(windows) -> None:
    healthy_content = to_tflite(_model(False), "int8", windows)
    healthy = largest(healthy_content)
    content = to_tflite(_model(True), "int8", windows)
    dead = largest(content)
    assert healthy is not None and healthy.scale < XNNPACK_LIMIT
    assert dead is not None and dead.refused_by_xnnpack()
    assert dead.op == "FULLY_CONNECTED" and "hidden" in dead.tensor
    assert largest(to_tflite(_model(True), "float32")) is None  # float files: no scales
    pytest.importorskip(
        "ai_edge_litert.interpreter",
        reason="ai-edge-litert is not installed (requirements/stack-nodeps.txt installs it)",
    )
    assert device_run("litert", healthy_content, windows[:8], invokes=0).loads is True
    run = device_run("litert", content, windows[:8], invokes=0)
    assert run.loads is False and run.predictions is not None  # the fallback resolver runs it
    assert len(set(run.predictions.tolist())) == 1  # nothing after the dead layer sees the input


def test_the_report_names_the_dead_layer_and_why_xnnpack_refuses_the_file() -> None:
    entry = {
        "client": 9,
        "format": "int8",
        "test_windows": 26,
        "litert": {
            "runtime": "ai-edge-litert 2.3.0",
            "loads": False,
            "resolver": "BUILTIN_WITHOUT_DEFAULT_DELEGATES",
            "error": "failed to prepare",
        },
        "zero_layer": {"layer": "dense", "units": 5, "test_classes": [0]},
        "requantization": {
            "op_index": 10,
            "op": "FULLY_CONNECTED",
            "tensor": "dense/MatMul",
            "scale": 2821.9,
            "output_scale": 7.8e-9,
        },
    }
    healthy = {
        **entry,
        "client": 8,
        "zero_layer": None,
        "litert": {"loads": True},
        "requantization": {**entry["requantization"], "scale": 0.02},
    }
    notes = device_notes([entry, healthy])
    assert "refuses 1 of 2 files (clients 9;" in notes
    assert "at or above it: client 9's op 10 (FULLY_CONNECTED, `dense/MatMul`), 2822" in notes
    assert zero_layer_notes([healthy]) == ""
    dead_line = zero_layer_notes([entry])
    assert "client 9: layer `dense` (5 values) is zero on every training window" in dead_line
    assert "all 26 test windows class 0" in dead_line
