"""A client's TFLite Micro project cross-built for a Cortex-M4 and run under QEMU.

Client 1 of a trained FedAvg run, exported as ``int8`` and ``int8-float-head`` with
``--micro``, is built with the project's own Makefile for ``TARGET=cortex-m4`` with CMSIS-NN
kernels and run on QEMU's ``mps2-an386`` board (a Cortex-M4F) with semihosting: every test
vector matches, and the outputs equal the host binary's and the TFLite Micro Python
interpreter's (int8 bit for bit, the float head within the host's tolerance). The host binary
is built with TFLM's reference kernels, so int8 CMSIS-NN on the Cortex-M4 equals the reference
kernels bit for bit. Instructions per inference come from ``-icount`` and are identical across
runs; the deployment build has no test vectors and is smaller than the test build.

The reference kernels cross-built for the Cortex-M4 (a second TFLM library, minutes of
compiling) are ``experiments/bench_cortex_m.py``'s: it states that their outputs equal the host
binary's and CMSIS-NN's bit for bit, that CMSIS-NN takes fewer than half their instructions
per inference, and that only CMSIS-NN's firmware holds the DSP instruction ``smlad``.

Skipped, saying so, only where the cross toolchain or QEMU is missing (CI installs them:
``.ci/install-cortex-m.sh``) or the TFLM and CMSIS trees of ``../shared/tflm`` are.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess

import numpy as np
import pytest

from edge_export.micro import micro_outputs
from edge_export.micro.project import FLOAT_TOLERANCE
from tests.edge_export.conftest import TFLM_TREE
from tests.edge_export.test_micro_float_head import float_array
from tests.edge_export.test_micro_project import c_array, c_constant

CMSIS = TFLM_TREE.parent / "cmsis"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def toolchain(tflm_tree):
    from edge_export.micro.cortex_m import missing_tools

    missing = missing_tools()
    if missing:
        pytest.skip(
            f"no {', '.join(missing)}: install gcc-arm-none-eabi, libnewlib-arm-none-eabi and "
            "qemu-system-arm (.ci/install-cortex-m.sh)"
        )
    if not (CMSIS / "cmsis_nn" / "Include" / "arm_nnfunctions.h").is_file():
        pytest.skip(f"CMSIS-NN not found at {CMSIS} (../shared/tflm/cmsis)")
    return tflm_tree


@pytest.fixture(scope="module")
def exported(tmp_path_factory, every_format_export):
    from tests.edge_export.test_export import _micro_export

    return _micro_export(tmp_path_factory, every_format_export, "1", "int8,int8-float-head")


def _project(exported, fmt: str):
    out, report = exported
    (entry,) = [e for e in report if e["format"] == fmt]
    return out / entry["micro_project"], entry, out / entry["path"]


def test_int8_on_a_cortex_m4_equals_the_host_and_the_interpreter(exported, toolchain, tflm_cache):
    from edge_export.micro.build import build_project
    from edge_export.micro.cortex_m import measure_cortex_m, run_qemu

    project, entry, tflite = _project(exported, "int8")
    ident = "client1_int8"
    text = (project / "test_vectors.h").read_text()
    count = c_constant(text, f"k{ident}_test_count")
    inputs = c_array(text, f"k{ident}_test_inputs").reshape(count, 128, 9).astype(np.int8)
    arena = entry["micro_arena_bytes"] + entry["micro_arena_headroom_bytes"]
    python = micro_outputs(tflite.read_bytes(), inputs, arena)
    host = build_project(project, toolchain, cache_dir=tflm_cache).run

    # the host binary runs TFLM's reference kernels: equal to it is equal to them, bit for bit
    # (their Cortex-M4 build: experiments/bench_cortex_m.py)
    cmsis = measure_cortex_m(
        project, toolchain, CMSIS, ident, "cortex-m4", "cmsis-nn", cache_dir=tflm_cache
    )
    run = cmsis.run
    assert run.returncode == 0, run.output
    assert run.output.rstrip().endswith(f"matched {count} of {count}") and count >= 1
    np.testing.assert_array_equal(np.stack(run.outputs), python)
    np.testing.assert_array_equal(np.stack(run.outputs), np.stack(host.outputs))
    # the stratified test vectors: every class the client's test windows have
    classes = c_array(text, f"k{ident}_test_classes")
    assert sum(cmsis.class_counts.values()) == count
    assert sorted(c for c, n in enumerate(cmsis.class_counts.values()) if n) == sorted(
        set(classes.tolist())
    )
    # -icount: the same instructions on a second run
    again = run_qemu(cmsis.build_dir / "test.elf", "cortex-m4")
    from edge_export.micro.cortex_m import instructions_per_inference

    assert instructions_per_inference(again.output) == cmsis.instructions_per_inference > 0
    # the DSP instructions CMSIS-NN's Cortex-M4 paths use are in its binary (and not in the
    # reference kernels', with fewer than half their instructions: bench_cortex_m.py)
    assert "smlad" in _disassembly(cmsis.build_dir / "firmware.elf")
    # the firmware: the model array and the arena, no test vectors, within the test build
    firmware, test = cmsis.firmware, cmsis.test
    assert firmware.model == tflite.stat().st_size
    assert firmware.arena == arena and firmware.stack == 8192
    assert firmware.flash + count * 128 * 9 <= test.flash
    assert firmware.runtime_flash > 0 and firmware.ram >= firmware.arena + firmware.stack
    print(
        f"\ncortex-m4 int8: {cmsis.instructions_per_inference / 1e6:.2f} M instructions "
        f"(CMSIS-NN); firmware {firmware.flash / 1024:.1f} KB flash, "
        f"{firmware.ram / 1024:.1f} KB RAM"
    )


def test_the_float_head_on_a_cortex_m4_is_within_the_host_tolerance(
    exported, toolchain, tflm_cache
):
    from edge_export.micro.build import build_project
    from edge_export.micro.cortex_m import measure_cortex_m

    project, entry, tflite = _project(exported, "int8-float-head")
    ident = "client1_int8_float_head"
    text = (project / "test_vectors.h").read_text()
    count = len(float_array(text, f"k{ident}_test_inputs")) // (128 * 9)
    inputs = float_array(text, f"k{ident}_test_inputs").reshape(count, 128, 9)
    arena = entry["micro_arena_bytes"] + entry["micro_arena_headroom_bytes"]
    python = micro_outputs(tflite.read_bytes(), inputs, arena)
    host = build_project(project, toolchain, cache_dir=tflm_cache).run
    result = measure_cortex_m(project, toolchain, CMSIS, ident, "cortex-m4", cache_dir=tflm_cache)
    run = result.run
    assert run.returncode == 0, run.output
    assert run.output.rstrip().endswith(f"matched {count} of {count}") and count >= 1
    printed = np.stack(run.outputs)
    assert printed.dtype == np.float32  # -u _printf_float: the fields are numbers
    np.testing.assert_allclose(printed, python, rtol=0, atol=FLOAT_TOLERANCE)
    np.testing.assert_allclose(printed, np.stack(host.outputs), rtol=0, atol=FLOAT_TOLERANCE)
    assert run.predicted == list(python.argmax(-1))
    # the float output layer is registered with the general kernel, the int8 body's int8-only
    source = (project / f"model_{ident}.cc").read_text()
    assert re.search(r"AddFullyConnected\(\)", source)
    assert "Register_CONV_2D_INT8" in source


def _disassembly(elf) -> str:
    return subprocess.run(
        ["arm-none-eabi-objdump", "-d", str(elf)], capture_output=True, text=True, check=True
    ).stdout


DOC_MARKER = "<!-- micro-cortex-m-build -->"


def test_the_docs_commands_run_from_a_run_to_a_qemu_cortex_m4_binary(
    toolchain, tflm_cache, tmp_path, monkeypatch
):
    """The host block's training command, then the Cortex-M block's commands word for word,
    in a folder with ``../shared/tflm/{tree,cmsis}`` (links): the programs get
    ``--data-dir`` (fixture UCI-HAR data) and ``--no-progress``; make gets ``TFLM_LIB`` from
    the environment, the cached TFLM + CMSIS-NN archive, so it compiles only the project."""
    from edge_export.cli import main as edge_export
    from edge_export.micro.build import tflm_library
    from edge_export.micro.cortex_m import make_variables
    from fedprune.cli import main as fedprune
    from tests.edge_export.test_micro_project import DOC, doc_commands, doc_workspace

    train = doc_commands()[0]
    lines = DOC.read_text().splitlines()
    start = lines.index(DOC_MARKER)
    assert lines[start + 1].strip() == "```bash"
    end = next(i for i in range(start + 2, len(lines)) if lines[i].strip() == "```")
    export, build, run = [line.strip() for line in lines[start + 2 : end] if line.strip()]
    assert train.split()[0] == "fedprune" and export.split()[0] == "edge-export"
    assert build.split()[0] == run.split()[0] == "make" and run.endswith(" run")
    work, extra = doc_workspace(tmp_path, monkeypatch, tree=toolchain, cmsis=CMSIS)
    assert fedprune([*shlex.split(train)[1:], *extra]) == 0
    assert edge_export([*shlex.split(export)[1:], *extra]) == 0
    project = work / shlex.split(build)[2]
    assert "TARGET ?= cortex-m4" in (project / "Makefile").read_text()  # --target's default
    variables = make_variables("cortex-m4", "cmsis-nn", CMSIS)
    library, _, _ = tflm_library(
        project, toolchain, cache_dir=tflm_cache, variables=variables, trees=[CMSIS.resolve()]
    )
    env = {**os.environ, "TFLM_LIB": str(library)}
    for command in (build, run):
        result = subprocess.run(
            ["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stdout + result.stderr
    last = result.stdout.splitlines()[-1]
    assert re.fullmatch(r"matched (\d+) of \1", last), last
    assert (project / "build" / "cortex-m4-cmsis-nn" / "firmware.elf").is_file()
