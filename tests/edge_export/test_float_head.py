"""``int8-float-head``: an int8 body whose last Dense layer and softmax run in float32
(edge_export.convert._float_head)."""

import numpy as np
import pytest
import tensorflow as tf

from edge_export.calibration import choose
from edge_export.convert import to_tflite
from edge_export.prepare import prepare_for_format
from edge_export.verify import run_tflite
from fedprune.models.cnn1d import build_har_cnn


@pytest.fixture(scope="module")
def windows():
    return np.random.default_rng(1).normal(size=(24, 128, 9)).astype(np.float32)


@pytest.fixture(scope="module")
def cnn():
    model = build_har_cnn((128, 9), 6, seed=2)
    kernel, _ = model.layers[-1].get_weights()  # a bias that the converter cannot drop
    model.layers[-1].set_weights([kernel, np.linspace(-0.3, 0.3, 6, dtype=np.float32)])
    return model


@pytest.fixture(scope="module")
def converted(cnn, windows):
    prepared = prepare_for_format(cnn, "int8-float-head", windows)
    return prepared, to_tflite(prepared.model, "int8-float-head", prepared.inputs(windows))


def _ops(content: bytes) -> list[tuple[str, str]]:
    interpreter = tf.lite.Interpreter(model_content=content)
    return [
        (op["op_name"], interpreter._get_tensor_details(op["outputs"][0], 0)["dtype"].__name__)
        for op in interpreter._get_ops_details()
    ]


def test_only_the_last_dense_layer_and_softmax_are_float(converted):
    _, content = converted
    ops = _ops(content)
    dense = [dtype for name, dtype in ops if name == "FULLY_CONNECTED"]
    assert dense[-1] == "float32" and dense[:-1] and set(dense[:-1]) == {"int8"}
    assert ops[-1] == ("SOFTMAX", "float32")
    assert {dtype for name, dtype in ops if name == "CONV_2D"} == {"int8"}
    assert ops[0] == ("QUANTIZE", "int8")  # float input, quantized inside the file


def test_the_head_computes_softmax_of_the_float_dense_layer_on_the_int8_body(
    converted, cnn, windows
):
    prepared, content = converted
    interpreter = tf.lite.Interpreter(
        model_content=content,
        experimental_preserve_all_tensors=True,
        experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF,
    )
    interpreter.allocate_tensors()
    ops = interpreter._get_ops_details()
    head = [op for op in ops if op["op_name"] == "FULLY_CONNECTED"][-1]
    body_out, kernel_index, bias_index = head["inputs"]
    kernel, bias = cnn.layers[-1].get_weights()
    np.testing.assert_array_equal(interpreter.get_tensor(kernel_index), kernel.T)
    np.testing.assert_array_equal(interpreter.get_tensor(bias_index), bias)
    inp, out = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    for window in prepared.inputs(windows[:4]):
        interpreter.set_tensor(inp["index"], window[None])
        interpreter.invoke()
        h = interpreter.get_tensor(body_out).astype(np.float64)
        logits = h @ kernel.astype(np.float64) + bias
        expected = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
        np.testing.assert_allclose(interpreter.get_tensor(out["index"]), expected, atol=1e-6)


def test_its_probabilities_are_not_rounded_to_int8_steps(converted, windows):
    prepared, content = converted
    probs, _ = run_tflite(content, prepared.inputs(windows))
    steps = probs * 256
    assert np.abs(steps - np.round(steps)).max() > 1e-3
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-5)


def test_its_preparation_is_chosen_by_measurements_in_its_own_format(cnn, windows):
    best, measured = choose(cnn, "int8-float-head", windows, seed=3)
    assert set(measured) == {"plain", "equalized", "half-equalized"}
    assert best == min(measured, key=lambda n: (*measured[n].key(), list(measured).index(n)))
