"""The requantization scale of each integer convolution and fully connected layer of a file.

An int8 layer computes ``y_q = round(acc * s) + zp_out`` from its int32 accumulator, where the
requantization scale ``s = input scale x weight scale / output scale`` (per output channel
for per-channel weights). XNNPACK, LiteRT's default CPU delegate, refuses to create an int8
convolution or fully connected operator whose ``s`` is 256 or more (its operator
constructors return "unsupported parameter", and the delegate fails to prepare the node):
that is :data:`XNNPACK_LIMIT`. TFLite's built-in kernels have no such limit.

The scale is that large where the layer's *output* scale is tiny, i.e. where the converter saw
an output range of about zero on its calibration windows, as when every unit of the layer was
zero on every window (see :mod:`edge_export.zero_layers`). Measured: one WISDM filters-85 %
client whose five dense units were all dead had ``s`` = 2822 (output scale 7.8e-9); the
largest ``s`` over the other 899 int8 files of that study (WISDM, five seeds) was 0.23.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from fedprune.quiet import native_output

XNNPACK_LIMIT = 256.0  # XNNPACK's int8 conv / fully connected operators need s < 256
# ops whose output is requantized from an int32 accumulator with input x weight scales
ACCUMULATING_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV")


@dataclasses.dataclass(frozen=True)
class Requantization:
    """The largest requantization scale of one layer (over its output channels)."""

    op_index: int  # the operator's index in the file's graph (in the order of execution)
    op: str  # its builtin name, "FULLY_CONNECTED"
    tensor: str  # the name of its output tensor (the Keras layer's name is in it)
    scale: float  # input scale x weight scale / output scale, the largest channel's
    output_scale: float

    def refused_by_xnnpack(self) -> bool:
        return self.scale >= XNNPACK_LIMIT

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _scales(details: dict) -> np.ndarray:
    return np.asarray(details["quantization_parameters"]["scales"], dtype=np.float64)


def requantization_scales(content: bytes) -> list[Requantization]:
    """Every accumulating integer layer's largest requantization scale, in graph order.
    Float layers (no scales on their tensors) are left out; an empty list for a float file.
    The file is read with TensorFlow's interpreter without delegates, which loads the files
    XNNPACK refuses."""
    with native_output():
        interpreter = tf.lite.Interpreter(
            model_content=content,
            experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
        )
    found = []
    for op in interpreter._get_ops_details():  # noqa: SLF001 (no public graph API in TF 2.14)
        if op["op_name"] not in ACCUMULATING_OPS or len(op["inputs"]) < 2:
            continue
        x, w = (interpreter._get_tensor_details(int(t), 0) for t in op["inputs"][:2])  # noqa: SLF001
        y = interpreter._get_tensor_details(int(op["outputs"][0]), 0)  # noqa: SLF001
        sx, sw, sy = _scales(x), _scales(w), _scales(y)
        if not (len(sx) and len(sw) and len(sy)) or np.any(sy <= 0):
            continue
        found.append(
            Requantization(
                op_index=int(op["index"]),
                op=op["op_name"],
                tensor=y["name"],
                scale=float(np.max(sx[0] * sw / sy[0])),
                output_scale=float(sy[0]),
            )
        )
    return found


def largest(content: bytes) -> Requantization | None:
    """The layer with the largest requantization scale, ``None`` where there is none."""
    scales = requantization_scales(content)
    return max(scales, key=lambda r: r.scale) if scales else None
