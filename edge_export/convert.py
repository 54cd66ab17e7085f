"""Keras -> TFLite conversions (the TFLite converter does the work; this picks its options)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator

import numpy as np
import tensorflow as tf

from edge_export.formats import FORMATS
from fedprune.errors import ConfigError
from fedprune.quiet import native_output

__all__ = ["FORMATS", "INTEGER_OPS", "sparse_tensors", "to_tflite"]

INTEGER_OPS = {  # full-integer formats: the op set and the input/output type
    "int8": (tf.lite.OpsSet.TFLITE_BUILTINS_INT8, tf.int8),
    "int16x8": (
        tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8,
        tf.int16,
    ),
}


def _representative(x: np.ndarray) -> Callable[[], Iterator[list[np.ndarray]]]:
    """Every window of ``x``, one per calibration step. The converter takes each activation's
    range as its min/max over all steps, so all training windows are used (a client has a few
    hundred): a prefix of them (time-ordered recordings) can miss activities and their ranges."""

    def gen() -> Iterator[list[np.ndarray]]:
        for window in x:
            yield [window[None].astype(np.float32)]

    return gen


def to_tflite(model: tf.keras.Model, fmt: str, representative_x: np.ndarray | None = None) -> bytes:
    """Convert ``model`` to a TFLite flatbuffer in format ``fmt`` (one of :data:`FORMATS`).

    * ``float32``: no optimization.
    * ``float16``: weights stored as float16, computed in float32.
    * ``dynamic``: int8 weights, float activations (dynamic-range quantization).
    * ``int8``: full-integer; int8 input and output; calibrated on ``representative_x``
      (all of the client's own training windows). Conv kernels are quantized per output
      channel, dense kernels and activations per tensor (TF 2.14's converter has no
      per-channel option for dense layers); the input is one int8 tensor with one scale.
    * ``float32-sparse`` / ``int8-sparse``: the same with the converter's sparsity
      optimization, which stores sufficiently sparse constant tensors in a compressed sparse
      format (see :func:`sparse_tensors` for what was actually stored sparse).
    * ``int16x8``: int8 weights (per channel for conv, as int8), int16 activations and int16
      input/output (TFLite's 16x8 mode), calibrated like int8. About the size of int8 with
      256x finer activation steps: no near-tie window flips; no XNNPACK kernels, so it runs
      on TFLite's reference kernels (slower, still ~1 ms per HAR window here). No sparse
      variant: with the sparsity optimization TF 2.14's int16x8 files run but compute wrong
      outputs for block-sparse dense kernels (1,762 of 2,060 test windows flipped, all 30
      clients of a block-16 run; per-weight masks came out right).
    * ``int8-float-head``: int8 like ``int8`` up to the last Dense layer, which runs in float32
      with the softmax (:func:`_float_head`); float32 input and output (the file quantizes
      its input itself). Removes the output's rounding: a full-integer file decides near-tie
      windows on int8 logits, and windows whose two top logits fall on one int8 step tie.
      The last layer's kernel is stored as float32 (4 bytes per weight instead of 1).
    * ``int8-qat`` / ``int8-qat-sparse``: the int8 conversion of a quantization-aware model
      (the caller passes the model from :func:`edge_export.qat.quantization_aware_finetune`;
      the converter takes ranges from its fake-quant nodes, calibration fills the rest).
    """
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    base, sparse = fmt.removesuffix("-sparse").removesuffix("-qat"), fmt.endswith("-sparse")
    optimizations = [] if base == "float32" else [tf.lite.Optimize.DEFAULT]
    if sparse:
        optimizations.insert(0, tf.lite.Optimize.EXPERIMENTAL_SPARSITY)
    converter.optimizations = optimizations
    if base == "float16":
        converter.target_spec.supported_types = [tf.float16]
    if base == FLOAT_HEAD:
        if representative_x is None or len(representative_x) == 0:
            raise ConfigError(f"{base} conversion needs representative windows")
        converter.representative_dataset = _representative(representative_x)
        # the debugger converts with float input and output and warns that the float input
        # has no range statistics (the QUANTIZE op it adds takes the calibrated range)
        with native_output(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Statistics for quantized inputs were expected")
            return _float_head(converter, _representative(representative_x[:DEBUG_WINDOWS]))
    if base in INTEGER_OPS:
        if representative_x is None or len(representative_x) == 0:
            raise ConfigError(f"{base} conversion needs representative windows")
        converter.representative_dataset = _representative(representative_x)
        ops, io_type = INTEGER_OPS[base]
        converter.target_spec.supported_ops = [ops]
        converter.inference_input_type = io_type
        converter.inference_output_type = io_type
    with native_output():  # the quantizer prints "fully_quantize: ..." to fd 2
        return converter.convert()


FLOAT_HEAD = "int8-float-head"
DEBUG_WINDOWS = 8  # windows the quantization debugger runs its own checks on (unused here)


def _float_head(
    converter: tf.lite.TFLiteConverter, debug_x: Callable[[], Iterator[list[np.ndarray]]]
) -> bytes:
    """The converter's int8 model with its last FULLY_CONNECTED op and every SOFTMAX left in
    float32, through TFLite's selective quantization (``QuantizationDebugger``'s
    ``denylisted_ops`` / ``denylisted_nodes``). The denylist names a node by its output
    tensor, read from the debugger's calibrated model; setting the options again quantizes
    that model without calibrating a second time."""
    debugger = tf.lite.experimental.QuantizationDebugger(
        converter=converter,
        debug_dataset=debug_x,
        debug_options=tf.lite.experimental.QuantizationDebugOptions(
            denylisted_ops=["SOFTMAX"], fully_quantize=False
        ),
    )
    head = _last_dense_output(debugger.calibrated_model)
    debugger.options = tf.lite.experimental.QuantizationDebugOptions(
        denylisted_ops=["SOFTMAX"], denylisted_nodes=[head], fully_quantize=False
    )
    return debugger.get_nondebug_quantized_model()


def _last_dense_output(model_content: bytes) -> str:
    """The output tensor name of the flatbuffer's last FULLY_CONNECTED op."""
    from tensorflow.lite.python import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(model_content, 0)
    graph = model.subgraphs[0]
    dense = schema.BuiltinOperator.FULLY_CONNECTED
    outputs = [
        op.outputs[0]
        for op in graph.operators
        if max(model.operatorCodes[op.opcodeIndex].builtinCode,
               model.operatorCodes[op.opcodeIndex].deprecatedBuiltinCode) == dense
    ]  # fmt: skip
    if not outputs:
        raise ConfigError(f"{FLOAT_HEAD} needs a model whose output layer is a Dense layer")
    name = graph.tensors[outputs[-1]].name
    return name.decode() if isinstance(name, bytes) else str(name)


def sparse_tensors(model_content: bytes) -> list[str]:
    """Names of the tensors the flatbuffer stores in TFLite's sparse format."""
    from tensorflow.lite.python import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(model_content, 0)
    return [
        t.name.decode() if isinstance(t.name, bytes) else str(t.name)
        for g in model.subgraphs
        for t in g.tensors
        if t.sparsity is not None
    ]
