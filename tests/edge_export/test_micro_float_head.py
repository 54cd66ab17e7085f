"""The TFLite Micro project of an ``int8-float-head`` file: float32 in, float32 probabilities
out, an int8 body in between.

Fast: the header declares float input and output types with no quantization constants, a
tolerance and ``<ident>_prepare_input`` (the input map alone: the model quantizes its input
itself); the test vectors are the prepared windows exactly, as float32 literals, and the
expected probabilities what a fresh run of the TFLite Micro Python interpreter gives; ``main``'s
printed float lines read back exactly.

Slow: a client's float-head project exported by ``edge-export --micro`` from a run builds on the
host and prints the interpreter's probabilities for every test vector; moving one expected
probability by more than the tolerance makes ``main`` report that window and exit 1.
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from edge_export.micro import export_micro_project, micro_outputs
from edge_export.micro.build import read_host_run
from edge_export.micro.project import FLOAT_TOLERANCE

LABELS = ["WALKING", "UPSTAIRS", "DOWNSTAIRS", "SITTING", "STANDING", "LAYING"]
IDENT = "client4_int8_float_head"


def float_array(text: str, name: str) -> np.ndarray:
    """The float32 literals of the array ``name`` (its initializer, flattened)."""
    start = re.search(rf"\b{name}\[[^\n]*?=\s*\{{", text)
    assert start, f"no array {name}"
    end = text.index("};", start.end())
    literals = re.findall(r"(-?[\d.]+(?:e[+-]?\d+)?)f", text[start.end() : end])
    return np.array([float(v) for v in literals], np.float32)


@pytest.fixture(scope="module")
def float_head_project(tmp_path_factory):
    """A project of an untrained HAR CNN's int8-float-head file, 20 random windows."""
    from edge_export.convert import to_tflite
    from edge_export.prepare import prepare_for_format
    from fedprune.models.cnn1d import build_har_cnn

    model = build_har_cnn((128, 9), 6, seed=3)
    windows = np.random.default_rng(3).normal(size=(20, 128, 9)).astype(np.float32)
    prepared = prepare_for_format(model, "int8-float-head", windows)
    inputs = prepared.inputs(windows)
    content = to_tflite(prepared.model, "int8-float-head", inputs)
    folder = tmp_path_factory.mktemp("micro") / "client4" / "micro_int8_float_head"
    normalization = {"offset": [0.25] * 9, "scale": [4.0] * 9}
    project = export_micro_project(
        content, folder, IDENT, inputs, LABELS, np.arange(20) % 6, normalization,
        title="client 4's int8-float-head model",
    )  # fmt: skip
    return project, content, inputs


def test_the_header_declares_float_tensors_a_tolerance_and_the_input_map_alone(
    float_head_project,
):
    project, _, _ = float_head_project
    header = project.header.read_text()
    assert f"typedef float {IDENT}_input_t;" in header
    assert f"typedef float {IDENT}_output_t;" in header
    assert f"k{IDENT}_output_tolerance = {FLOAT_TOLERANCE:.9g}f;" in header
    # no scale or zero point: the file's own QUANTIZE op takes the float input
    assert "quant_scale" not in header and "zero_point" not in header
    body = header.split(f"inline void {IDENT}_prepare_input(const float* raw,", 1)[1]
    body = body.split("\n}\n", 1)[0]
    assert f"k{IDENT}_input_offset[c]) / k{IDENT}_input_scale[c]" in body
    assert "lroundf" not in body and f"{IDENT}_quantize_input" not in header
    readme = (project.folder / "README.md").read_text()
    assert f"{IDENT}_prepare_input(raw, input->data.f)" in readme
    assert f"k{IDENT}_output_tolerance" in readme


def test_the_test_vectors_are_the_windows_and_a_fresh_interpreter_run(float_head_project):
    project, content, inputs = float_head_project
    text = (project.folder / "test_vectors.h").read_text()
    written = float_array(text, f"k{IDENT}_test_inputs").reshape(16, 128, 9)
    np.testing.assert_array_equal(written, inputs[:16])  # float32 literals read back exactly
    expected = float_array(text, f"k{IDENT}_test_expected").reshape(16, 6)
    fresh = micro_outputs(content, written, project.arena_size)
    np.testing.assert_array_equal(expected, fresh)
    np.testing.assert_allclose(expected.sum(-1), 1.0, atol=1e-5)  # float softmax, not int8 steps
    assert len(np.unique(expected)) > 16 * 3


def test_main_checks_floats_within_the_tolerance_and_the_predicted_class(float_head_project):
    project, _, _ = float_head_project
    main = (project.folder / "main.cc").read_text()
    assert f"fabsf(scores[c] - expected[c]) <= k{IDENT}_output_tolerance" in main
    assert "close && best == expected_best" in main
    assert "memcmp(scores" not in main


def test_printed_float_lines_read_back_as_float32():
    probabilities = np.float32([0.0123, 0.9877, 1e-5])
    printed = " ".join(f"{float(p):.9g}" for p in probabilities)  # main's printf("%.9g")
    assert "e-06" in printed
    output = (
        "arena: 100 of 200 bytes used\n"
        f"window 0 outputs {printed} predicted 1 B (true B) ok\n"
        "window 1 outputs -3 120 -128 predicted 1 B (true ?) ok\n"
        "matched 2 of 2\n"
    )
    run = read_host_run(output)
    assert run.outputs[0].dtype == np.float32
    np.testing.assert_array_equal(run.outputs[0], probabilities)
    assert run.outputs[1].dtype.kind == "i" and list(run.outputs[1]) == [-3, 120, -128]
    assert run.predicted == [1, 1] and (run.matched, run.total) == (2, 2)


def test_its_host_build_shares_the_int8_projects_objects(float_head_project, tmp_path):
    """Another op set, the same tree, compiler and flags: one object folder, two archives."""
    if shutil.which("make") is None or shutil.which("g++") is None:
        pytest.skip("no make or g++ on this machine: the keys come from the Makefile")
    from edge_export.convert import to_tflite
    from edge_export.micro.build import cache_keys
    from fedprune.models.cnn1d import build_har_cnn

    project, _, inputs = float_head_project
    content = to_tflite(build_har_cnn((128, 9), 6, seed=3), "int8", inputs)
    int8 = export_micro_project(content, tmp_path / "int8", "client4_int8", inputs[:2], LABELS)
    tree = tmp_path / "tree"  # what the Makefile checks a TFLM tree by
    (tree / "tensorflow/lite/micro").mkdir(parents=True)
    (tree / "tensorflow/lite/micro/micro_interpreter.h").write_text("")
    head_objects, head_archive = cache_keys(project.folder, tree)
    int8_objects, int8_archive = cache_keys(int8.folder, tree)
    assert head_objects == int8_objects and head_archive != int8_archive
    assert cache_keys(project.folder, tree) == (head_objects, head_archive)
    makefile = (project.folder / "Makefile").read_text()
    assert "dequantize" in makefile and "dequantize" not in (int8.folder / "Makefile").read_text()


# -- slow: exported from a run, built on the host -----------------------------------------------


@pytest.fixture(scope="module")
def exported(tmp_path_factory, every_format_export):
    """Client 1 of a trained FedAvg run exported as int8-float-head with ``--micro``."""
    from tests.edge_export.test_export import _micro_export

    return _micro_export(tmp_path_factory, every_format_export, "1", "int8-float-head")


@pytest.mark.slow
def test_a_float_head_project_builds_and_prints_the_interpreters_probabilities(
    exported, tflm_tree, tflm_cache
):
    from edge_export.micro.build import build_project

    out, report = exported
    (entry,) = report
    assert entry["micro_project"] == "client1/micro_int8_float_head"
    # float in, quantized by the file; the int8 body's activations dequantized for the head
    assert entry["micro_ops"][0] == "QUANTIZE" and "DEQUANTIZE" in entry["micro_ops"]
    project = out / entry["micro_project"]
    built = build_project(project, tflm_tree, cache_dir=tflm_cache)
    text = (project / "test_vectors.h").read_text()
    ident = "client1_int8_float_head"
    count = len(float_array(text, f"k{ident}_test_inputs")) // (128 * 9)
    inputs = float_array(text, f"k{ident}_test_inputs").reshape(count, 128, 9)
    content = (out / "client1" / "int8-float-head.tflite").read_bytes()
    arena = entry["micro_arena_bytes"] + entry["micro_arena_headroom_bytes"]
    python = micro_outputs(content, inputs, arena)
    run = built.run
    assert run.returncode == 0, run.output
    assert run.output.rstrip().endswith(f"matched {count} of {count}") and count >= 1
    printed = np.stack(run.outputs)
    assert printed.dtype == np.float32
    np.testing.assert_allclose(printed, python, rtol=0, atol=FLOAT_TOLERANCE)
    assert run.predicted == list(python.argmax(-1))
    print(f"\nfloat head on the host: largest difference {np.abs(printed - python).max():.3g}")

    # one expected probability moved past the tolerance: that window, and only it, differs
    tampered = out / "client1-tampered"
    shutil.copytree(project, tampered, ignore=shutil.ignore_patterns("build", "main"))
    expected = float_array(text, f"k{ident}_test_expected")
    first = re.search(rf"k{ident}_test_expected\[[^\n]*\{{\s*\{{\s*", text).end()
    literal = re.match(r"-?[\d.]+(?:e[+-]?\d+)?f", text[first:]).group(0)
    moved = f"{expected[0] + 10 * FLOAT_TOLERANCE:.9g}f"
    (tampered / "test_vectors.h").write_text(text[:first] + moved + text[first + len(literal) :])
    again = build_project(tampered, tflm_tree, cache_dir=tflm_cache).run
    assert again.returncode == 1
    assert again.output.rstrip().endswith(f"matched {count - 1} of {count}")
    window_lines = [line for line in again.output.splitlines() if line.startswith("window ")]
    assert window_lines[0].endswith("DIFFERS from test_vectors.h")
    assert all(line.endswith(" ok") for line in window_lines[1:])
