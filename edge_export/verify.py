"""Run an exported ``.tflite`` on test windows and compare it with the Keras model, and run it
in the interpreters a device installs (:func:`device_run`); time many files in LiteRT in
one pass (:func:`time_together`).

Device runtimes (:data:`RUNTIMES`): LiteRT (``ai-edge-litert``, what a Raspberry Pi or Android
user installs today; tflite-runtime's last release is 2.14 from 2023) and tflite-runtime 2.14
(TensorFlow's own version). Each file is loaded with the runtime's *default* interpreter (its
default delegates: XNNPACK on a CPU), one thread. A file the default interpreter refuses is
reported as not loading, with the runtime's error, and is then run with
:data:`FALLBACK_RESOLVER` (the built-in kernels without default delegates), the op resolver a
user must pass to run it. Interpretation of "latency": the median time of one ``invoke`` (one
window, input already set), over ``invokes`` calls cycling through the test windows.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import platform
import time
from collections.abc import Sequence
from types import ModuleType

import numpy as np
import tensorflow as tf

from fedprune.quiet import native_output

# runtime -> (distribution, interpreter module); the report's device columns, in this order
RUNTIMES = {
    "litert": ("ai-edge-litert", "ai_edge_litert.interpreter"),
    "tflite_runtime": ("tflite-runtime", "tflite_runtime.interpreter"),
}
DEFAULT_RESOLVER = "default"  # the interpreter as constructed with no resolver argument
FALLBACK_RESOLVER = "BUILTIN_WITHOUT_DEFAULT_DELEGATES"  # OpResolverType member
LATENCY_INVOKES = 200  # invokes per latency median (see device_run)


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
        module = importlib.import_module(RUNTIMES["tflite_runtime"][1])
    except ImportError:
        return None
    _interpreter(module, model_content, DEFAULT_RESOLVER)  # raises where it does not
    return True


@dataclasses.dataclass(frozen=True)
class DeviceRun:
    """What one device runtime did with one file (:func:`device_run`)."""

    runtime: str  # distribution and version: "ai-edge-litert 2.3.0"; "" if not installed
    loads: bool | None  # its default interpreter loads and runs the file; None: not installed
    error: str = ""  # the default interpreter's error, on one line, where it does not load
    resolver: str = ""  # what the predictions ran with: DEFAULT_RESOLVER or FALLBACK_RESOLVER
    predictions: np.ndarray | None = None  # the class of every window
    latency_ms: float | None = None  # median per-invoke time, one thread
    invokes: int = 0  # invokes the median is over


def cpu_name() -> str:
    """The host CPU as ``lscpu`` names it (``/proc/cpuinfo``'s "model name"), else the
    platform's processor or machine name (aarch64 kernels list no model name)."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _interpreter(module: ModuleType, model_content: bytes, resolver: str):
    """A 1-thread interpreter of ``module`` with tensors allocated and one invoke done (the
    delegates prepare at allocation; a kernel can still refuse at its first invoke)."""
    options = {}
    if resolver != DEFAULT_RESOLVER:
        options["experimental_op_resolver_type"] = getattr(module.OpResolverType, resolver)
    refused = None
    # "INFO: Created TensorFlow Lite XNNPACK delegate for CPU."; a refusal's own log lines
    # are dropped with it (the caller reports the error)
    with native_output():
        try:
            interpreter = module.Interpreter(model_content=model_content, num_threads=1, **options)
            interpreter.allocate_tensors()
            inp = interpreter.get_input_details()[0]
            interpreter.set_tensor(inp["index"], np.zeros(inp["shape"], inp["dtype"]))
            interpreter.invoke()
        except (RuntimeError, ValueError) as error:
            refused = error
    if refused is not None:
        raise refused
    return interpreter


def device_run(
    runtime: str, model_content: bytes, x: np.ndarray, invokes: int = LATENCY_INVOKES
) -> DeviceRun:
    """Load ``model_content`` in ``runtime`` (a key of :data:`RUNTIMES`) with its default
    interpreter, else with :data:`FALLBACK_RESOLVER`; the class of every window of ``x``
    (already in the file's input space: what :func:`verify` is given) and, unless
    ``invokes`` is 0, the median of ``max(invokes, len(x))`` invoke times cycling through
    ``x``. A runtime that is not installed gives ``loads=None`` and nothing else."""
    dist, name = RUNTIMES[runtime]
    try:
        module = importlib.import_module(name)
    except ImportError:
        return DeviceRun(runtime="", loads=None)
    label = f"{dist} {importlib.metadata.version(dist)}"
    error = ""
    try:
        interpreter = _interpreter(module, model_content, DEFAULT_RESOLVER)
    except (RuntimeError, ValueError) as refused:
        error = " ".join(str(refused).split())
        try:
            interpreter = _interpreter(module, model_content, FALLBACK_RESOLVER)
        except (RuntimeError, ValueError):  # nothing runs it: no predictions to report
            return DeviceRun(runtime=label, loads=False, error=error)
    resolver = FALLBACK_RESOLVER if error else DEFAULT_RESOLVER
    inp = interpreter.get_input_details()[0]
    out = interpreter.get_output_details()[0]
    windows = quantize(x, inp)
    calls = max(invokes, len(x)) if invokes else len(x)
    predictions, times = np.empty(len(x), dtype=np.int64), []
    for i in range(calls):
        interpreter.set_tensor(inp["index"], windows[i % len(x)][None])
        t0 = time.perf_counter()
        interpreter.invoke()
        times.append(time.perf_counter() - t0)
        if i < len(x):
            predictions[i] = int(np.argmax(interpreter.get_tensor(out["index"])[0]))
    return DeviceRun(
        runtime=label,
        loads=not error,
        error=error,
        resolver=resolver,
        predictions=predictions,
        latency_ms=1000.0 * float(np.median(times)) if invokes else None,
        invokes=calls if invokes else 0,
    )


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


@dataclasses.dataclass(frozen=True)
class TimedTogether:
    """LiteRT's time per window of many files measured in one pass (:func:`time_together`):
    ``latency_ms`` per file (``None`` where its default interpreter refuses it)."""

    runtime: str  # "ai-edge-litert 2.3.0"
    cpu: str
    rounds: int
    invokes: int  # per file and round
    latency_ms: tuple[float | None, ...]


def time_together(
    contents: Sequence[bytes], rounds: int = 10, invokes: int = 100, seed: int = 0
) -> TimedTogether | None:
    """LiteRT's default interpreter (1 thread) on every file of ``contents`` in one pass,
    ``None`` where LiteRT is not installed.

    Interpretation: a file's time is the median of its ``rounds x invokes`` invoke times.
    Every round times every file (``invokes`` calls, one window set before them), in an order
    shuffled per round (``seed``), so that what drifts during the pass (the clock, the other
    load on the machine) reaches every file alike and their ratios stay comparable: exports
    timed one after another, minutes apart, differed by up to 22 % at this size (a few µs per
    window). The window is a fixed random one in the input's type; an int8 kernel's time does not
    depend on the values.
    """
    dist, name = RUNTIMES["litert"]
    try:
        module = importlib.import_module(name)
    except ImportError:
        return None
    interpreters = []
    for content in contents:
        try:
            interpreters.append(_interpreter(module, content, DEFAULT_RESOLVER))
        except (RuntimeError, ValueError):
            interpreters.append(None)
    rng = np.random.default_rng(seed)
    for interpreter in interpreters:
        if interpreter is not None:
            inp = interpreter.get_input_details()[0]
            info = np.iinfo(inp["dtype"]) if np.dtype(inp["dtype"]).kind == "i" else None
            window = (
                rng.integers(info.min, info.max + 1, inp["shape"]).astype(inp["dtype"])
                if info is not None
                else rng.standard_normal(inp["shape"]).astype(inp["dtype"])
            )
            interpreter.set_tensor(inp["index"], window)
    times: list[list[float]] = [[] for _ in interpreters]
    live = [i for i, interpreter in enumerate(interpreters) if interpreter is not None]
    for _ in range(rounds):
        for i in rng.permutation(live):
            invoke, found = interpreters[i].invoke, times[i]
            for _ in range(invokes):
                t0 = time.perf_counter()
                invoke()
                found.append(time.perf_counter() - t0)
    return TimedTogether(
        runtime=f"{dist} {importlib.metadata.version(dist)}",
        cpu=cpu_name(),
        rounds=rounds,
        invokes=invokes,
        latency_ms=tuple(1000.0 * float(np.median(t)) if t else None for t in times),
    )
