"""Run an exported ``.tflite`` on test windows and compare it with the Keras model."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import tensorflow as tf

from fedprune.quiet import native_output


@dataclasses.dataclass(frozen=True)
class Verification:
    tflite_acc: float
    agreement: float  # fraction of windows where TFLite and Keras predict the same class
    max_prob_diff: float  # max |p_tflite - p_keras| (after dequantizing int8 outputs)
    latency_ms: float  # median per-window invoke time, XNNPACK
    latency_ref_ms: float  # the same with the reference kernels
    predictions: np.ndarray | None = None  # the TFLite class of every window
    tied_windows: int = 0  # windows whose largest output is shared by two classes


def runtime_loads(model_content: bytes) -> bool | None:
    """Whether the ``tflite-runtime`` interpreter (what a Raspberry Pi or Android app ships)
    loads and runs the file; ``None`` if the package is not installed."""
    try:
        from tflite_runtime.interpreter import Interpreter
    except ImportError:
        return None
    with native_output():
        interpreter = Interpreter(model_content=model_content)
        interpreter.allocate_tensors()
    inp = interpreter.get_input_details()[0]
    interpreter.set_tensor(inp["index"], np.zeros(inp["shape"], inp["dtype"]))
    interpreter.invoke()
    return True


def quantize(x: np.ndarray, details: dict) -> np.ndarray:
    """``x`` as the interpreter tensor ``details`` expects it: rounded to its integer type with
    its scale and zero point (int8, int16), or float32 unchanged."""
    dtype = np.dtype(details["dtype"])
    if dtype.kind != "i":
        return x.astype(np.float32)
    scale, zero = details["quantization"]
    info = np.iinfo(dtype)
    return np.clip(np.round(x / scale + zero), info.min, info.max).astype(dtype)


def dequantize(y: np.ndarray, details: dict) -> np.ndarray:
    """An interpreter output back to float (identity for float outputs)."""
    if np.dtype(details["dtype"]).kind != "i":
        return y
    scale, zero = details["quantization"]
    return (y.astype(np.float32) - zero) * scale


def run_tflite(
    model_content: bytes, x: np.ndarray, reference_kernels: bool = False
) -> tuple[np.ndarray, float]:
    """Class probabilities for every window (one invoke per window) and median latency (ms),
    with XNNPACK (default) or TFLite's reference kernels."""
    resolver = (
        tf.lite.experimental.OpResolverType.BUILTIN_REF
        if reference_kernels
        else tf.lite.experimental.OpResolverType.AUTO
    )
    with native_output():  # "INFO: Created TensorFlow Lite XNNPACK delegate for CPU."
        interpreter = tf.lite.Interpreter(
            model_content=model_content, num_threads=1, experimental_op_resolver_type=resolver
        )
        interpreter.allocate_tensors()
    inp = interpreter.get_input_details()[0]
    out = interpreter.get_output_details()[0]
    probs, times = [], []
    for window in x:
        interpreter.set_tensor(inp["index"], quantize(window[None], inp))
        t0 = time.perf_counter()
        interpreter.invoke()
        times.append(time.perf_counter() - t0)
        probs.append(dequantize(interpreter.get_tensor(out["index"])[0], out))
    return np.asarray(probs), 1000.0 * float(np.median(times))


def verify(
    model_content: bytes, keras_probs: np.ndarray, x: np.ndarray, y: np.ndarray
) -> Verification:
    """Accuracy, agreement with Keras, max probability difference and latency on ``x``."""
    probs, latency = run_tflite(model_content, x)
    _, latency_ref = run_tflite(model_content, x[:50], reference_kernels=True)
    pred = probs.argmax(-1)
    top = probs.max(axis=-1, keepdims=True)
    return Verification(
        tflite_acc=float(np.mean(pred == y)),
        agreement=float(np.mean(pred == keras_probs.argmax(-1))),
        max_prob_diff=float(np.max(np.abs(probs - keras_probs))),
        latency_ms=latency,
        latency_ref_ms=latency_ref,
        predictions=pred,
        tied_windows=int(np.sum((probs == top).sum(axis=-1) > 1)),
    )
