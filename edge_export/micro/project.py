"""A TFLite Micro project of one exported model: model files, test vectors, host build.

``export_micro_project(content, folder, "client3_int8", ...)`` writes into ``folder``:

* ``model_client3_int8.h`` / ``.cc``: the flatbuffer as a 16-byte aligned array and its
  length, the arena size (measured minimum + :func:`~edge_export.micro.model.arena_headroom`),
  the labels, the input map and the input/output quantization (an ``int8-float-head``
  file takes and gives float32: it has none, and a float tolerance instead), and
  ``client3_int8_register_ops(resolver)``, which adds exactly the model's ops. Every name
  carries the identifier, so several models link into one firmware.
* ``test_vectors.h``: up to 16 test windows, stratified by class, in the model's input type,
  and the outputs the TFLite Micro interpreter gives them with the same arena size.
* ``main.cc``, ``Makefile``, ``README.md``: a program that runs the test vectors and prints
  ``matched K of N``, for the host or a Cortex-M core (:mod:`edge_export.micro.host`,
  :mod:`edge_export.micro.makefile`).
* ``startup_cortex_m.c``, ``cortex_m.ld.in``, ``board_cortex_m.c``, ``firmware.cc``: the
  Cortex-M build's own files and its deployment program (:mod:`edge_export.micro.device`).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from edge_export.micro.c_array import (
    byte_rows,
    c_comment,
    c_identifier,
    c_tensor_type,
    float_literal,
    float_rows,
    int_rows,
    normalization_c,
    string_literal,
)
from edge_export.micro.device import write_device_files
from edge_export.micro.host import write_host_files
from edge_export.micro.layout import MicroProject
from edge_export.micro.model import (
    INT8_REGISTRATIONS,
    RESOLVER_METHODS,
    arena_headroom,
    arena_upper_bound,
    check_micro_compatible,
    headroom_rule,
    int8_only_ops,
    measure_arena,
    quantize_input,
    reference_outputs,
    timed_micro_outputs,
)
from edge_export.micro.targets import HOST, TARGETS
from fedprune.errors import ConfigError

TEST_VECTORS = 16  # test windows written to test_vectors.h (fewer if the client has fewer)
# main.cc: a float probability matches when it is this close to the expected one
FLOAT_TOLERANCE = 1e-5


@dataclasses.dataclass(frozen=True)
class _Tensors:
    """The model's input and output tensor as the C code sees them."""

    input_shape: list[int]
    input_dtype: np.dtype
    input_scale: float
    input_zero_point: int
    output_size: int
    output_dtype: np.dtype
    output_scale: float
    output_zero_point: int


def _tensors(model_content: bytes) -> _Tensors:
    import tensorflow as tf

    from fedprune.quiet import native_output

    with native_output():
        interpreter = tf.lite.Interpreter(model_content=model_content)
    inp = interpreter.get_input_details()[0]
    out = interpreter.get_output_details()[0]
    return _Tensors(
        input_shape=[int(s) for s in inp["shape"]],
        input_dtype=np.dtype(inp["dtype"]),
        input_scale=float(inp["quantization"][0]),
        input_zero_point=int(inp["quantization"][1]),
        output_size=int(np.prod(out["shape"])),
        output_dtype=np.dtype(out["dtype"]),
        output_scale=float(out["quantization"][0]),
        output_zero_point=int(out["quantization"][1]),
    )


def stratified_windows(true_classes: Sequence[int] | None, total: int, wanted: int) -> list[int]:
    """Indices of the test vectors among ``total`` windows: ``wanted`` of them (more when the
    client has more classes), taken in turn from each class present, in class order, each
    class's windows in their order; every class present gets one when there are more classes
    than ``wanted``. Without classes: the first ``wanted`` windows."""
    if true_classes is None:
        return list(range(min(wanted, total)))
    classes = np.asarray(true_classes[:total])
    by_class = [list(np.flatnonzero(classes == c)) for c in sorted(set(classes.tolist()))]
    count = min(max(wanted, len(by_class)), total)
    chosen: list[int] = []
    while len(chosen) < count:
        for indices in by_class:
            if indices and len(chosen) < count:
                chosen.append(int(indices.pop(0)))
    return sorted(chosen)


def export_micro_project(
    model_content: bytes,
    folder: Path,
    name: str,
    windows: np.ndarray,
    labels: Sequence[str],
    true_classes: Sequence[int] | None = None,
    normalization: dict | None = None,
    title: str = "a model",
    test_vectors: int = TEST_VECTORS,
    target: str = HOST,
) -> MicroProject:
    """Check the model, measure its arena and write the project into ``folder``.

    ``windows``: test windows as the model's float input takes them (after the same
    preparation as the exported file); ``test_vectors`` of them, stratified by class
    (:func:`stratified_windows`), become the test vectors, quantized with the model's input
    scale (kept float32 for a float input).
    ``true_classes``: the windows' labels' indices.
    ``normalization``: the per-channel map raw sensor values need first (``None``: none).
    ``name`` becomes the C identifier every symbol carries (``client3_int8``).
    ``target``: what a plain ``make`` builds for (``host``, ``cortex-m4``, ...; the ``TARGET``
    make variable chooses another)."""
    if target not in TARGETS:
        raise ConfigError(f"--target must be one of {', '.join(TARGETS)}, not {target!r}")
    ident = c_identifier(name)
    ops = check_micro_compatible(model_content)
    tensors = _tensors(model_content)
    chosen = stratified_windows(true_classes, len(windows), test_vectors)
    count = len(chosen)
    # in the model's input type: quantized, or unchanged for a float32 input
    inputs = quantize_input(model_content, np.asarray(windows, np.float32)[chosen])
    sample = inputs[:1] if count else np.zeros(tensors.input_shape, tensors.input_dtype)
    measured = measure_arena(model_content, sample)
    minimum = measured if measured is not None else arena_upper_bound(model_content)
    headroom = arena_headroom(minimum)
    timed = timed_micro_outputs(model_content, inputs, minimum + headroom) if count else None
    expected, latency_ms = (None, None) if timed is None else timed
    expected_by = "the TFLite Micro Python interpreter (tflite-micro package)"
    if count and expected is None:
        expected = reference_outputs(model_content, inputs)
        expected_by = "TFLite's reference kernels (tflite-micro not installed; may differ)"
    project = MicroProject(
        folder=folder,
        ident=ident,
        ops=ops,
        arena_bytes=minimum,
        arena_measured=measured is not None,
        headroom_bytes=headroom,
        test_vectors=count,
        expected_by=expected_by,
        latency_ms=latency_ms,
        int8_ops=tuple(int8_only_ops(model_content)),
        target=target,
        class_counts=_class_counts(true_classes, chosen, len(labels)),
    )
    folder.mkdir(parents=True, exist_ok=True)
    project.header.write_text(_header(project, tensors, labels, normalization, title))
    project.source.write_text(_source(project, model_content))
    truth = [int(true_classes[k]) for k in chosen] if true_classes is not None else [-1] * count
    (folder / "test_vectors.h").write_text(
        _test_vectors(project, tensors, inputs, expected, truth, title, chosen)
    )
    write_host_files(project, tensors.input_dtype, title, tensors.output_dtype)
    write_device_files(project, _is_float(tensors.input_dtype), _is_float(tensors.output_dtype))
    return project


def _class_counts(
    true_classes: Sequence[int] | None, chosen: list[int], labels: int
) -> tuple[int, ...] | None:
    if true_classes is None:
        return None
    picked = [int(true_classes[k]) for k in chosen]
    return tuple(picked.count(c) for c in range(labels))


def _ranges(indices: list[int]) -> str:
    """``[0, 1, 2, 7]`` as ``0-2, 7``."""
    parts: list[str] = []
    for k in indices:
        if parts and parts[-1].split("-")[-1] == str(k - 1):
            parts[-1] = f"{parts[-1].split('-')[0]}-{k}"
        else:
            parts.append(str(k))
    return ", ".join(parts) or "none"


def _guard(kind: str, ident: str) -> str:
    return f"FEDPRUNE_{kind}_{ident.upper()}_H_"


def _arena_comment(project: MicroProject) -> str:
    if project.arena_measured:
        try:
            version = importlib.metadata.version("tflite-micro")
        except importlib.metadata.PackageNotFoundError:  # pragma: no cover
            version = "unknown version"
        how = f"measured with the TFLite Micro interpreter (tflite-micro {version})"
    else:
        how = "an UPPER BOUND from the graph (tflite-micro was not installed to measure it)"
    return c_comment(
        f"Tensor arena. The minimum is {how}: the smallest arena, to 16 bytes, in which the "
        f"model allocates and runs. The size to allocate adds headroom: {headroom_rule()}. "
        "The minimum holds only for the TFLite Micro build that measured it: another TFLM "
        "version allocates differently, optimized kernels (CMSIS-NN, ESP-NN) ask for scratch "
        "buffers the reference kernels do not, and an arena that the target does not place on "
        "a 16-byte boundary loses up to 15 bytes to alignment."
    )


def _header(
    project: MicroProject,
    tensors: _Tensors,
    labels: Sequence[str],
    normalization: dict | None,
    title: str,
) -> str:
    i = project.ident
    in_t, out_t = c_tensor_type(tensors.input_dtype), c_tensor_type(tensors.output_dtype)
    shape = tensors.input_shape
    size = int(np.prod(shape))
    guard = _guard("MODEL", i)
    ops = ", ".join(project.ops)
    return (
        f"// Generated by fedprune edge-export: {title}, for TensorFlow Lite Micro.\n"
        f'// Every name declared here carries "{i}", so several models link into one firmware.\n'
        f"#ifndef {guard}\n#define {guard}\n\n"
        "#include <math.h>\n#include <stdint.h>\n\n"
        '#include "tensorflow/lite/micro/micro_mutable_op_resolver.h"\n\n'
        "// The .tflite flatbuffer (16-byte aligned; it stays in flash).\n"
        f"extern const unsigned char {i}_model[];\n"
        f"extern const unsigned int {i}_model_len;\n\n"
        + _arena_comment(project)
        + f"constexpr int k{i}_arena_minimum = {project.arena_bytes};\n"
        f"constexpr int k{i}_arena_headroom = {project.headroom_bytes};\n"
        f"constexpr int k{i}_arena_size = {project.arena_size};  // minimum + headroom\n\n"
        f"// Input: one {in_t} tensor of shape {{{', '.join(map(str, shape))}}}"
        " (time steps x channels, row-major);\n"
        + _input_rule(tensors)
        + f"typedef {in_t} {i}_input_t;\n"
        f"constexpr int k{i}_input_rank = {len(shape)};\n"
        f"constexpr int k{i}_input_shape[{len(shape)}] = {{{', '.join(map(str, shape))}}};\n"
        f"constexpr int k{i}_input_size = {size};  // elements\n"
        + _quantization_constants(
            i, "input", tensors.input_dtype, tensors.input_scale, tensors.input_zero_point
        )
        + "\n"
        + normalization_c(i, normalization)
        + f"// Output: {tensors.output_size} class scores ({out_t}); "
        + _output_rule(tensors)
        + f"typedef {out_t} {i}_output_t;\n"
        f"constexpr int k{i}_output_size = {tensors.output_size};\n"
        + _quantization_constants(
            i, "output", tensors.output_dtype, tensors.output_scale, tensors.output_zero_point
        )
        + _tolerance_constant(i, tensors.output_dtype)
        + "\n"
        "// Class labels, in output order.\n"
        f"constexpr int k{i}_label_count = {len(labels)};\n"
        f"constexpr const char* k{i}_labels[{len(labels)}] = {{"
        + ", ".join(string_literal(label) for label in labels)
        + "};\n\n"
        + _input_function(i, tensors.input_dtype, normalization is not None)
        + c_comment(f"Adds exactly the model's ops ({ops}) to a resolver of k{i}_op_count entries.")
        + f"constexpr int k{i}_op_count = {len(project.ops)};\n"
        f"TfLiteStatus {i}_register_ops(\n"
        f"    tflite::MicroMutableOpResolver<k{i}_op_count>& resolver);\n"
        f"\n#endif  // {guard}\n"
    )


def _is_float(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "f"


def _input_rule(tensors: _Tensors) -> str:
    if _is_float(tensors.input_dtype):
        return "// float values after the input map below; the model quantizes them itself.\n"
    return "// q = round(z / quant_scale) + zero_point, clamped to the type's range.\n"


def _output_rule(tensors: _Tensors) -> str:
    if _is_float(tensors.output_dtype):
        return "probabilities, computed in float32.\n"
    return "probability = (q - zero_point) * quant_scale.\n"


def _quantization_constants(
    ident: str, kind: str, dtype: np.dtype, scale: float, zero_point: int
) -> str:
    """The scale and zero point of an integer tensor (a float32 tensor has none)."""
    if _is_float(dtype):
        return ""
    return (
        f"constexpr float k{ident}_{kind}_quant_scale = {float_literal(scale)};\n"
        f"constexpr int k{ident}_{kind}_zero_point = {zero_point};\n"
    )


def _tolerance_constant(ident: str, output_dtype: np.dtype) -> str:
    """How far a float probability may be from the expected one in ``main``'s check."""
    if not _is_float(output_dtype):
        return ""
    return (
        c_comment(
            "main.cc's check: a window matches when every probability is within this of "
            "test_vectors.h's and the predicted class is the same (a compiler that fuses "
            "multiply-adds, as on a Cortex-M4F, changes the last bits of float results)."
        )
        + f"constexpr float k{ident}_output_tolerance = {float_literal(FLOAT_TOLERANCE)};\n"
    )


def _input_function(ident: str, input_dtype: np.dtype, mapped: bool) -> str:
    """``<ident>_quantize_input`` (integer input: the input map, then quantization) or
    ``<ident>_prepare_input`` (float input: the input map only)."""
    i = ident
    mapping = ""
    if mapped:
        mapping = (
            f"    const int c = i % k{i}_channels;\n"
            f"    z = (z - k{i}_input_offset[c]) / k{i}_input_scale[c];\n"
        )
    head = "// A window of raw sensor values (the channels interleaved, as in training) as the\n"
    if _is_float(input_dtype):
        return (
            head + "// model's input: the input map above, if the model has one.\n"
            f"inline void {i}_prepare_input(const float* raw, {i}_input_t* input) {{\n"
            f"  for (int i = 0; i < k{i}_input_size; ++i) {{\n"
            "    float z = raw[i];\n" + mapping + "    input[i] = z;\n  }\n}\n\n"
        )
    info = np.iinfo(input_dtype)
    return (
        head + "// model's input: the input map above, if the model has one, then quantization.\n"
        f"inline void {i}_quantize_input(const float* raw, {i}_input_t* input) {{\n"
        f"  for (int i = 0; i < k{i}_input_size; ++i) {{\n"
        "    float z = raw[i];\n"
        + mapping
        + f"    const long q = lroundf(z / k{i}_input_quant_scale) + k{i}_input_zero_point;\n"
        f"    input[i] = static_cast<{i}_input_t>(q < {info.min} ? {info.min} "
        f": (q > {info.max} ? {info.max} : q));\n"
        "  }\n}\n\n"
    )


def _source(project: MicroProject, model_content: bytes) -> str:
    i = project.ident

    def registration(op: str) -> str:
        return f"tflite::{INT8_REGISTRATIONS[op]}()" if op in project.int8_ops else ""

    adds = "".join(
        f"  if (resolver.{RESOLVER_METHODS[op]}({registration(op)}) != kTfLiteOk) {{\n"
        "    return kTfLiteError;\n  }\n"
        for op in project.ops
    )
    return (
        f'#include "{project.header.name}"\n\n'
        f"alignas(16) const unsigned char {i}_model[] = {{\n" + byte_rows(model_content) + "\n};\n"
        f"const unsigned int {i}_model_len = {len(model_content)};\n\n"
        f"TfLiteStatus {i}_register_ops(\n"
        f"    tflite::MicroMutableOpResolver<k{i}_op_count>& resolver) {{\n"
        + adds
        + "  return kTfLiteOk;\n}\n"
    )


def _test_vectors(
    project: MicroProject,
    tensors: _Tensors,
    inputs: np.ndarray,
    expected: np.ndarray | None,
    truth: list[int],
    title: str,
    chosen: list[int] | None = None,
) -> str:
    i = project.ident
    count = project.test_vectors
    rows = max(count, 1)  # C has no empty arrays: one zero row stands in when there is none
    size = int(np.prod(tensors.input_shape))
    inputs = inputs.reshape(count, size) if count else np.zeros((1, size), tensors.input_dtype)
    expected = (
        expected.reshape(count, -1)
        if count
        else np.zeros((1, tensors.output_size), tensors.output_dtype)
    )
    truth = truth if count else [-1]
    guard = _guard("TEST_VECTORS", i)

    def table(values: np.ndarray) -> str:
        def rows(row: np.ndarray) -> str:
            if _is_float(row.dtype):
                return float_rows(row, 8, "    ")
            return int_rows(row, 24, "    ")

        return ",\n".join("  {\n" + rows(row) + "\n  }" for row in values)

    return (
        f"// Test vectors of {title}: {count} of its test windows, taken in turn from each\n"
        f"// class (windows {_ranges(chosen or [])} of its test set), prepared as for the\n"
        f"// exported file and in the model's input type, and the raw outputs that\n"
        f"// {project.expected_by} gives them\n"
        f"// with an arena of k{i}_arena_size bytes. main.cc checks a build against them.\n"
        f"#ifndef {guard}\n#define {guard}\n\n"
        f'#include "{project.header.name}"\n\n'
        f"constexpr int k{i}_test_count = {count};\n"
        f"alignas(16) constexpr {i}_input_t k{i}_test_inputs[{rows}][k{i}_input_size] = {{\n"
        + table(inputs)
        + "\n};\n"
        f"constexpr {i}_output_t k{i}_test_expected[{rows}][k{i}_output_size] = {{\n"
        + table(expected)
        + "\n};\n"
        f"// The true class of each window (its index in k{i}_labels; -1: unknown).\n"
        f"constexpr int k{i}_test_classes[{rows}] = {{{', '.join(str(int(t)) for t in truth)}}};\n"
        f"\n#endif  // {guard}\n"
    )
