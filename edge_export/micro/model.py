"""What TFLite Micro needs to run a flatbuffer: the ops to register and the tensor arena.

TFLite Micro cannot read the converter's sparse tensor format, so micro exports start from a
dense flatbuffer (normally the int8 one). The arena size is *measured* with the TFLite Micro
Python interpreter (``tflite-micro`` package) when it is installed: the smallest arena, to 16
bytes, with which the model allocates and runs. Without it, an *upper bound* is computed
from the graph (every non-constant tensor alive at once, plus a fixed allowance for the
interpreter's own structures) and labelled as such. A firmware allocates the minimum plus
:func:`arena_headroom`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time

import numpy as np

from fedprune.errors import ConfigError

# TFLite Micro resolver methods for the builtin ops these models use (MicroMutableOpResolver).
RESOLVER_METHODS = {
    "CONCATENATION": "AddConcatenation",
    "CONV_2D": "AddConv2D",
    "DEPTHWISE_CONV_2D": "AddDepthwiseConv2D",
    "FULLY_CONNECTED": "AddFullyConnected",
    "MAX_POOL_2D": "AddMaxPool2D",
    "AVERAGE_POOL_2D": "AddAveragePool2D",
    "RESHAPE": "AddReshape",
    "EXPAND_DIMS": "AddExpandDims",
    "SQUEEZE": "AddSqueeze",
    "SOFTMAX": "AddSoftmax",
    "RELU": "AddRelu",
    "LOGISTIC": "AddLogistic",
    "QUANTIZE": "AddQuantize",
    "DEQUANTIZE": "AddDequantize",
    "ADD": "AddAdd",
    "MUL": "AddMul",
    "MEAN": "AddMean",
}
# The kernel variants that only take int8 tensors (int8 weights for the weighted ops): with
# CMSIS-NN, registering these instead of the general kernels leaves CMSIS-NN's int4/int16 paths
# out of the binary (21 KB less flash for the HAR CNN, same outputs). Without CMSIS-NN, TFLM
# declares them as the general kernels.
INT8_REGISTRATIONS = {
    "CONV_2D": "Register_CONV_2D_INT8",
    "DEPTHWISE_CONV_2D": "Register_DEPTHWISE_CONV_2D_INT8",
    "FULLY_CONNECTED": "Register_FULLY_CONNECTED_INT8",
    "MAX_POOL_2D": "Register_MAX_POOL_2D_INT8",
    "AVERAGE_POOL_2D": "Register_AVERAGE_POOL_2D_INT8",
    "SOFTMAX": "Register_SOFTMAX_INT8",
    "ADD": "Register_ADD_INT8",
    "MUL": "Register_MUL_INT8",
}
_INT8 = 9  # TensorType.INT8
_TYPE_BYTES = {0: 4, 1: 2, 2: 4, 3: 1, 4: 8, 6: 1, 7: 2, 9: 1, 10: 8}  # TensorType -> bytes
INTERPRETER_ALLOWANCE = 4096  # bytes for node/registration structs in the upper bound

# Headroom on top of the measured minimum arena: 10 % of it, at least 1 KiB, the sum rounded
# up to 16 bytes (TFLite Micro's arena alignment).
HEADROOM_FRACTION = 0.10
HEADROOM_MIN_BYTES = 1024
ARENA_ALIGNMENT = 16


@dataclasses.dataclass(frozen=True)
class MicroExport:
    ops: list[str]
    arena_bytes: int  # the minimum (measured, or the upper bound), without headroom
    arena_measured: bool  # False: an upper bound computed from the graph


def arena_headroom(minimum: int) -> int:
    """Bytes a firmware adds to the minimum arena: ``max(1 KiB, 10 %)``, the sum rounded up to
    16 bytes. The minimum is exact only for the TFLite Micro build that measured it; another
    version's allocations, optimized kernels' scratch buffers and an arena that the target does
    not place on a 16-byte boundary need more."""
    wanted = minimum + max(HEADROOM_MIN_BYTES, int(np.ceil(minimum * HEADROOM_FRACTION)))
    return -(-wanted // ARENA_ALIGNMENT) * ARENA_ALIGNMENT - minimum


def headroom_rule() -> str:
    """:func:`arena_headroom` in words."""
    return (
        f"max({HEADROOM_MIN_BYTES} B, {HEADROOM_FRACTION:.0%} of the minimum), the sum rounded "
        f"up to {ARENA_ALIGNMENT} bytes"
    )


def _schema():  # noqa: ANN202
    from tensorflow.lite.python import schema_py_generated as schema

    return schema


def builtin_ops(model_content: bytes) -> list[str]:
    """Builtin operator names used by the flatbuffer, in its operator-code order."""
    schema = _schema()
    model = schema.ModelT.InitFromPackedBuf(model_content, 0)
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    return [names[max(op.builtinCode, op.deprecatedBuiltinCode)] for op in model.operatorCodes]


def check_micro_compatible(model_content: bytes) -> list[str]:
    """The model's ops, or an error naming what TFLite Micro cannot run."""
    schema = _schema()
    model = schema.ModelT.InitFromPackedBuf(model_content, 0)
    if any(t.sparsity is not None for g in model.subgraphs for t in g.tensors):
        raise ConfigError("TFLite Micro cannot read sparse tensors; export a dense format")
    ops = builtin_ops(model_content)
    unknown = [op for op in ops if op not in RESOLVER_METHODS]
    if unknown:
        raise ConfigError(f"ops without a TFLite Micro resolver entry here: {', '.join(unknown)}")
    return ops


def int8_only_ops(model_content: bytes) -> list[str]:
    """The ops of :data:`INT8_REGISTRATIONS` whose every node reads and writes only int8
    tensors (inputs, weights and output; a missing optional input is skipped)."""
    schema = _schema()
    model = schema.ModelT.InitFromPackedBuf(model_content, 0)
    names = builtin_ops(model_content)
    int8 = {name: True for name in names if name in INT8_REGISTRATIONS}
    for graph in model.subgraphs:
        for op in graph.operators:
            name = names[op.opcodeIndex]
            if name not in int8:
                continue
            tensors = [t for t in (*op.inputs, *op.outputs) if t >= 0]
            int8[name] = int8[name] and all(graph.tensors[t].type == _INT8 for t in tensors[:2])
            int8[name] = int8[name] and graph.tensors[op.outputs[0]].type == _INT8
    return [name for name, only in int8.items() if only]


def arena_upper_bound(model_content: bytes) -> int:
    """Sum of all non-constant tensors (no memory reuse) plus an interpreter allowance."""
    schema = _schema()
    model = schema.ModelT.InitFromPackedBuf(model_content, 0)
    total = 0
    for g in model.subgraphs:
        for t in g.tensors:
            buffer = model.buffers[t.buffer] if t.buffer < len(model.buffers) else None
            if buffer is not None and buffer.data is not None and len(buffer.data):
                continue  # constant: lives in flash, not in the arena
            shape = t.shape if t.shape is not None else np.array([1])
            total += int(np.prod(shape)) * _TYPE_BYTES.get(t.type, 4)
    return total + INTERPRETER_ALLOWANCE


@contextlib.contextmanager
def _quiet_stderr():  # noqa: ANN202 (the micro interpreter prints allocation failures to fd 2)
    saved = os.dup(2)
    with open(os.devnull, "wb") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def quantize_input(model_content: bytes, x: np.ndarray) -> np.ndarray:
    """``x`` quantized with the model's integer input type, scale and zero point."""
    import tensorflow as tf

    from edge_export.verify import quantize
    from fedprune.quiet import native_output

    with native_output():
        details = tf.lite.Interpreter(model_content=model_content).get_input_details()[0]
    return quantize(x, details)


def _micro_runtime():  # noqa: ANN202
    try:
        from tflite_micro.python.tflite_micro import runtime
    except ImportError:
        return None
    return runtime


def measure_arena(model_content: bytes, sample: np.ndarray, limit: int = 1 << 20) -> int | None:
    """Smallest arena (16-byte steps) with which TFLite Micro runs ``sample``; ``None`` if the
    ``tflite-micro`` package is not installed."""
    runtime = _micro_runtime()
    if runtime is None:
        return None

    def runs(size: int) -> bool:
        try:
            interpreter = runtime.Interpreter.from_bytes(model_content, arena_size=size)
            interpreter.set_input(sample, 0)
            interpreter.invoke()
            return True
        except Exception:  # allocation failure: the arena is too small
            return False

    with _quiet_stderr():
        if not runs(limit):
            raise ConfigError(f"the model does not run in TFLite Micro even with {limit} B")
        lo, hi = 0, limit
        while hi - lo > 16:
            mid = (lo + hi) // 2 // 16 * 16
            lo, hi = (lo, mid) if runs(mid) else (mid, hi)
    return hi


def micro_outputs(model_content: bytes, windows: np.ndarray, arena_size: int) -> np.ndarray | None:
    """The raw (integer) output of every quantized window, one invoke each, with the TFLite
    Micro Python interpreter and an arena of ``arena_size`` bytes; ``None`` if the
    ``tflite-micro`` package is not installed."""
    timed = timed_micro_outputs(model_content, windows, arena_size)
    return None if timed is None else timed[0]


def timed_micro_outputs(
    model_content: bytes, windows: np.ndarray, arena_size: int
) -> tuple[np.ndarray, float] | None:
    """:func:`micro_outputs` and the median milliseconds of one ``invoke`` over the windows:
    the time TFLite Micro's reference kernels take per window on this host (the kernels a
    firmware runs unless it links optimized ones such as CMSIS-NN; a microcontroller is
    slower by its clock and its lack of SIMD). ``None`` without ``tflite-micro``."""
    runtime = _micro_runtime()
    if runtime is None:
        return None
    with _quiet_stderr():
        interpreter = runtime.Interpreter.from_bytes(model_content, arena_size=arena_size)
        outputs, seconds = [], []
        for window in windows:
            interpreter.set_input(window[None], 0)
            start = time.perf_counter()
            interpreter.invoke()
            seconds.append(time.perf_counter() - start)
            outputs.append(np.array(interpreter.get_output(0)).reshape(-1))
    return np.stack(outputs), 1000.0 * float(np.median(seconds))


def reference_outputs(model_content: bytes, windows: np.ndarray) -> np.ndarray:
    """The raw output of every quantized window with TFLite's reference kernels (what stands
    in for TFLite Micro when its Python package is not installed)."""
    import tensorflow as tf

    from fedprune.quiet import native_output

    with native_output():
        interpreter = tf.lite.Interpreter(
            model_content=model_content,
            experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF,
        )
        interpreter.allocate_tensors()
    inp = interpreter.get_input_details()[0]
    out = interpreter.get_output_details()[0]
    outputs = []
    for window in windows:
        interpreter.set_tensor(inp["index"], window[None])
        interpreter.invoke()
        outputs.append(interpreter.get_tensor(out["index"]).reshape(-1))
    return np.stack(outputs)
