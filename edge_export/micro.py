"""TFLite Micro: the model as a C array, the ops to register, and the tensor arena it needs.

TFLite Micro cannot read the converter's sparse tensor format, so micro exports start from a
dense flatbuffer (normally the int8 one). The arena size is *measured* with the TFLite Micro
Python interpreter (``tflite-micro`` package) when it is installed: the smallest arena, to 16
bytes, with which the model allocates and runs. Without it, an *upper bound* is computed
from the graph (every non-constant tensor alive at once, plus a fixed allowance for the
interpreter's own structures) and labelled as such.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from pathlib import Path

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
_TYPE_BYTES = {0: 4, 1: 2, 2: 4, 3: 1, 4: 8, 6: 1, 7: 2, 9: 1, 10: 8}  # TensorType -> bytes
INTERPRETER_ALLOWANCE = 4096  # bytes for node/registration structs in the upper bound


@dataclasses.dataclass(frozen=True)
class MicroExport:
    ops: list[str]
    arena_bytes: int
    arena_measured: bool  # False: an upper bound computed from the graph


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


def measure_arena(model_content: bytes, sample: np.ndarray, limit: int = 1 << 20) -> int | None:
    """Smallest arena (16-byte steps) with which TFLite Micro runs ``sample``; ``None`` if the
    ``tflite-micro`` package is not installed."""
    try:
        from tflite_micro.python.tflite_micro import runtime
    except ImportError:
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


def c_identifier(name: str) -> str:
    ident = re.sub(r"\W", "_", name)
    return ident if not ident[0].isdigit() else f"m_{ident}"


def _normalization_c(ident: str, normalization: dict | None) -> str:
    """C constants for the per-channel map the firmware applies before quantizing."""
    if normalization is None:
        return ""

    def literal(v: float) -> str:  # "2f" is not a C++ float literal; "2.0f" is
        text = f"{v:.9g}"
        return (text if any(c in text for c in ".e") else text + ".0") + "f"

    def floats(values: list[float]) -> str:
        return ", ".join(literal(v) for v in values)

    n = len(normalization["offset"])
    return (
        "// Before quantizing, per channel c: z = (x - offset[c]) / scale[c]\n"
        f"constexpr int k{ident}_channels = {n};\n"
        f"constexpr float k{ident}_input_offset[{n}] = {{{floats(normalization['offset'])}}};\n"
        f"constexpr float k{ident}_input_scale[{n}] = {{{floats(normalization['scale'])}}};\n\n"
    )


def write_c_array(
    model_content: bytes,
    path_stem: Path,
    name: str,
    ops: list[str],
    arena: MicroExport,
    normalization: dict | None = None,
) -> tuple[Path, Path]:
    """``<stem>.h`` / ``<stem>.cc`` with the model array (16-byte aligned), its length, the
    resolver registration, the arena size and the input normalization constants."""
    ident = c_identifier(name)
    header = path_stem.with_suffix(".h")
    source = path_stem.with_suffix(".cc")
    guard = f"{ident.upper()}_H_"
    kind = (
        "measured with the TFLite Micro interpreter"
        if arena.arena_measured
        else ("UPPER BOUND from the graph (tflite-micro not installed)")
    )
    header.write_text(
        f"// Generated by fedprune edge-export. Ops: {', '.join(ops)}.\n"
        f"#ifndef {guard}\n#define {guard}\n\n"
        f"extern const unsigned char {ident}[];\n"
        f"extern const unsigned int {ident}_len;\n\n"
        f"// Tensor arena: {kind}.\n"
        f"constexpr int k{ident}_arena_size = {arena.arena_bytes};\n\n"
        + _normalization_c(ident, normalization)
        + f"// Register exactly these ops:\n"
        f"//   tflite::MicroMutableOpResolver<{len(ops)}> resolver;\n"
        + "".join(f"//   resolver.{RESOLVER_METHODS[op]}();\n" for op in ops)
        + f"\n#endif  // {guard}\n"
    )
    rows = [
        "  " + ", ".join(f"0x{b:02x}" for b in model_content[i : i + 12])
        for i in range(0, len(model_content), 12)
    ]
    source.write_text(
        f'#include "{header.name}"\n\n'
        f"alignas(16) const unsigned char {ident}[] = {{\n" + ",\n".join(rows) + "\n};\n"
        f"const unsigned int {ident}_len = {len(model_content)};\n"
    )
    return header, source


def export_micro(
    model_content: bytes,
    path_stem: Path,
    name: str,
    sample: np.ndarray,
    normalization: dict | None = None,
) -> MicroExport:
    """Check, measure (or bound) the arena, and write the C array pair (with the input
    normalization constants when the model expects normalized input)."""
    ops = check_micro_compatible(model_content)
    measured = measure_arena(model_content, sample)
    arena = MicroExport(
        ops=ops,
        arena_bytes=measured if measured is not None else arena_upper_bound(model_content),
        arena_measured=measured is not None,
    )
    write_c_array(model_content, path_stem, name, ops, arena, normalization)
    return arena
