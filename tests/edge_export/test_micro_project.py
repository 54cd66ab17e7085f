"""The TFLite Micro project that ``edge-export --micro`` writes per client and format.

Fast: the generated files name only symbols that carry the project's identifier, the
header's arena is the measured minimum plus the documented headroom, and the expected
outputs in ``test_vectors.h`` are what a fresh run of the TFLite Micro Python interpreter
gives (a project written from an untrained HAR CNN, no compiler needed).

Slow: a client's project from an exported run compiles on the host against the TFLite Micro
tree in ``../shared/tflm/tree`` (skipped, saying so, where that tree or a compiler is
missing) and prints, for every test vector, the Python interpreter's outputs bit for bit;
two clients' projects link into one program; and the commands of the docs' "From a run to a
host binary" block run as written. The TFLM library objects are compiled once into a cache
folder that the later builds reuse.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from edge_export.micro import arena_headroom, export_micro_project, measure_arena, micro_outputs

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "edge-export.md"
DOC_MARKER = "<!-- micro-host-build -->"
LABELS = ["WALKING", "UPSTAIRS", "DOWNSTAIRS", "SITTING", "STANDING", "LAYING"]
IDENT = "client7_int8"


# -- reading the generated C++ back -------------------------------------------------------------


def declared_names(text: str) -> list[str]:
    """Every name declared at file scope in generated C++ (macros, types, constants, arrays,
    functions): column-0 lines, the identifier before the first ``=``, ``[``, ``(`` or ``;``."""
    names = []
    for line in text.splitlines():
        if line.startswith("#define "):
            names.append(line.split()[1])
            continue
        if not line or line[0] in " #/}{" or line.startswith("#"):
            continue
        line = re.sub(r"alignas\(\d+\)\s*", "", line)
        match = re.match(r"[^=\[(;]*?(\w+)\s*(?:[=\[(;]|$)", line)
        assert match, f"unreadable declaration: {line!r}"
        names.append(match.group(1))
    return names


def c_array(text: str, name: str) -> np.ndarray:
    """The integers of the array ``name`` (its initializer, flattened)."""
    start = re.search(rf"\b{name}\[[^\n]*?=\s*\{{", text)
    assert start, f"no array {name}"
    end = text.index("};", start.end())
    return np.array([int(v) for v in re.findall(r"-?\d+", text[start.end() : end])])


def c_constant(text: str, name: str) -> int:
    match = re.search(rf"\b{name} = (-?\d+);", text)
    assert match, f"no constant {name}"
    return int(match.group(1))


# -- fast: a project written from an untrained model --------------------------------------------


@pytest.fixture(scope="module")
def small_project(tmp_path_factory):
    """A project of an untrained HAR CNN's int8 file, 20 random windows, a per-channel map."""
    from edge_export.convert import to_tflite
    from fedprune.models.cnn1d import build_har_cnn

    model = build_har_cnn((128, 9), 6, seed=0)
    windows = np.random.default_rng(0).normal(size=(20, 128, 9)).astype(np.float32)
    content = to_tflite(model, "int8", windows)
    normalization = {"offset": [0.5] * 9, "scale": [2.0] * 9}
    folder = tmp_path_factory.mktemp("micro") / "client7" / "micro_int8"
    project = export_micro_project(
        content, folder, IDENT, windows, LABELS, np.arange(20) % 6, normalization,
        title="client 7's int8 model",
    )  # fmt: skip
    return project, content, windows


def test_the_project_has_its_files(small_project):
    project, _, _ = small_project
    names = sorted(p.name for p in project.folder.iterdir())
    assert names == sorted(
        [
            "Makefile",
            "README.md",
            "board_cortex_m.c",
            "cortex_m.ld.in",
            "firmware.cc",
            "main.cc",
            f"model_{IDENT}.cc",
            f"model_{IDENT}.h",
            "startup_cortex_m.c",
            "test_vectors.h",
        ]
    )
    assert project.test_vectors == 16  # min(16, windows)


def test_every_generated_symbol_carries_the_identifier(small_project):
    project, _, _ = small_project
    names = []
    for name in (f"model_{IDENT}.h", f"model_{IDENT}.cc", "test_vectors.h"):
        names += declared_names((project.folder / name).read_text())
    assert [n for n in names if IDENT not in n.lower()] == []
    wanted = {
        f"{IDENT}_model",
        f"{IDENT}_model_len",
        f"k{IDENT}_arena_size",
        f"k{IDENT}_arena_minimum",
        f"k{IDENT}_labels",
        f"k{IDENT}_label_count",
        f"k{IDENT}_input_offset",
        f"k{IDENT}_input_scale",
        f"k{IDENT}_input_quant_scale",
        f"k{IDENT}_input_zero_point",
        f"k{IDENT}_output_quant_scale",
        f"k{IDENT}_output_zero_point",
        f"k{IDENT}_input_shape",
        f"k{IDENT}_op_count",
        f"{IDENT}_register_ops",
        f"k{IDENT}_test_inputs",
        f"k{IDENT}_test_expected",
    }
    assert wanted <= set(names)


def test_the_register_function_adds_exactly_the_models_ops(small_project):
    from edge_export.micro import RESOLVER_METHODS, builtin_ops

    project, content, _ = small_project
    source = project.source.read_text()
    calls = re.findall(r"resolver\.(Add\w+)\((?:tflite::(\w+)\(\))?\)", source)
    assert [method for method, _ in calls] == [RESOLVER_METHODS[op] for op in builtin_ops(content)]
    header = project.header.read_text()
    assert c_constant(header, f"k{IDENT}_op_count") == len(calls)
    # an int8 model: every op with an int8-only kernel variant registers that variant
    registered = {op: kernel for op, (_, kernel) in zip(builtin_ops(content), calls)}
    assert registered["CONV_2D"] == "Register_CONV_2D_INT8"
    assert registered["FULLY_CONNECTED"] == "Register_FULLY_CONNECTED_INT8"
    assert registered["SOFTMAX"] == "Register_SOFTMAX_INT8"
    assert all(kernel == "" for op, kernel in registered.items() if op in ("RESHAPE",))


def test_test_vectors_take_every_class_in_turn():
    from edge_export.micro.project import stratified_windows

    # one client's HAPT test set began with 14 STANDING windows: the first 16 had 3 classes
    classes = [4] * 14 + [1, 2] + [0] * 10 + [3] * 5 + [4] * 3
    chosen = stratified_windows(classes, len(classes), 16)
    picked = [classes[k] for k in chosen]
    assert len(chosen) == 16 and chosen == sorted(set(chosen))
    assert set(picked) == {0, 1, 2, 3, 4}
    assert sorted(picked.count(c) for c in range(5)) == [1, 1, 4, 5, 5]
    # more classes than wanted: one window of each; none known: the first windows
    assert len(stratified_windows(list(range(20)), 20, 16)) == 20
    assert stratified_windows(None, 30, 16) == list(range(16))
    assert stratified_windows([0, 1], 2, 16) == [0, 1]


def test_the_arena_is_the_measured_minimum_plus_the_headroom_rule(small_project):
    from edge_export.micro import quantize_input

    project, content, windows = small_project
    header = project.header.read_text()
    minimum = c_constant(header, f"k{IDENT}_arena_minimum")
    size = c_constant(header, f"k{IDENT}_arena_size")
    assert minimum == measure_arena(content, quantize_input(content, windows[:1]))
    # the rule: at least max(1 KiB, 10 % of the minimum) more, rounded up to 16 bytes
    least = minimum + max(1024, int(np.ceil(0.1 * minimum)))
    assert size % 16 == 0 and least <= size < least + 16
    assert size - minimum == arena_headroom(minimum) == project.headroom_bytes
    assert "max(1024 B, 10% of the minimum)" in header  # the comment states the rule


def test_headroom_rule():
    assert arena_headroom(0) == 1024
    assert arena_headroom(4096) == 1024  # 10 % is less than 1 KiB
    assert arena_headroom(20544) == 2064  # 2054.4 -> 2055, then to the next 16 bytes
    assert arena_headroom(10_240) == 1024
    assert (10_250 + arena_headroom(10_250)) % 16 == 0


def test_test_vectors_are_the_quantized_windows_and_a_fresh_interpreter_run(small_project):
    from edge_export.micro import quantize_input

    project, content, windows = small_project
    text = (project.folder / "test_vectors.h").read_text()
    header = project.header.read_text()
    inputs = c_array(text, f"k{IDENT}_test_inputs").reshape(16, 128, 9)
    expected = c_array(text, f"k{IDENT}_test_expected").reshape(16, 6)
    np.testing.assert_array_equal(inputs, quantize_input(content, windows[:16]))
    arena = c_constant(header, f"k{IDENT}_arena_size")
    fresh = micro_outputs(content, inputs.astype(np.int8), arena)
    np.testing.assert_array_equal(expected, fresh)
    assert c_constant(text, f"k{IDENT}_test_count") == 16
    np.testing.assert_array_equal(c_array(text, f"k{IDENT}_test_classes"), np.arange(16) % 6)


def test_without_the_micro_interpreter_the_arena_is_a_labelled_upper_bound(
    small_project, tmp_path, monkeypatch
):
    from edge_export.micro import model

    _, content, windows = small_project
    monkeypatch.setattr(model, "_micro_runtime", lambda: None)
    project = export_micro_project(content, tmp_path / "p", IDENT, windows[:3], LABELS)
    assert not project.arena_measured and project.test_vectors == 3
    assert "UPPER BOUND" in project.header.read_text()
    assert "reference kernels" in (tmp_path / "p" / "test_vectors.h").read_text()
    assert "an upper bound from the graph" in (tmp_path / "p" / "README.md").read_text()


def test_the_makefile_names_the_missing_tree(small_project):
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    project, _, _ = small_project
    env = {k: v for k, v in os.environ.items() if k not in ("TFLM_DIR", "TFLM_LIB")}
    result = subprocess.run(
        ["make", "-C", str(project.folder)], capture_output=True, text=True, env=env
    )
    assert result.returncode != 0 and "TFLM_DIR is not set" in result.stderr
    bad = subprocess.run(
        ["make", "-C", str(project.folder), f"TFLM_DIR={project.folder}"],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert bad.returncode != 0 and "micro_interpreter.h" in bad.stderr
    assert not (project.folder / "build").exists()  # nothing compiled


# -- slow: host builds against the TFLM tree ----------------------------------------------------


@pytest.fixture(scope="module")
def exported(tmp_path_factory, every_format_export):
    """Clients 1 and 2 of a trained FedAvg run exported as int8 with ``--micro``."""
    from tests.edge_export.test_export import _micro_export

    return _micro_export(tmp_path_factory, every_format_export, "1,2", "int8")


@pytest.mark.slow
def test_report_names_the_project(exported):
    out, report = exported
    entry = report[0]
    assert entry["micro_project"] == "client1/micro_int8"
    assert entry["micro_path"] == "client1/micro_int8/model_client1_int8.cc"
    assert entry["micro_arena_measured"] and 4_096 < entry["micro_arena_bytes"] <= 64 * 1024
    assert entry["micro_arena_headroom_bytes"] == arena_headroom(entry["micro_arena_bytes"])
    assert entry["micro_ops"][0] == "CONCATENATION" and entry["micro_ops"][-1] == "SOFTMAX"
    header = (out / "client1" / "micro_int8" / "model_client1_int8.h").read_text()
    assert "kclient1_int8_input_offset[9]" in header and '"WALKING"' in header
    markdown = (out / "export_report.md").read_text()
    assert "headroom" in markdown
    # the budget: flash = the largest file, RAM = arena + headroom, the TFLM invoke time
    assert entry["micro_latency_ms"] > 0
    arena_kb = max(e["micro_arena_bytes"] + e["micro_arena_headroom_bytes"] for e in report) / 1024
    lines = markdown.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| format | flash: model KB"))
    budget = next(line for line in lines[head:] if line.startswith("| int8 | "))
    cells = [c.strip() for c in budget.split("|")[1:-1]]
    assert cells[1] == f"{max(e['bytes'] for e in report) / 1024:.1f}"
    assert cells[2] == f"{arena_kb:.1f}"
    assert float(cells[3]) == pytest.approx(
        np.median([e["micro_latency_ms"] for e in report]), abs=1e-3
    )


@pytest.mark.slow
def test_project_builds_on_the_host_and_prints_the_interpreters_outputs(
    exported, tflm_tree, tflm_cache
):
    from edge_export.micro.build import build_project

    out, report = exported
    project = out / report[0]["micro_project"]
    start = time.perf_counter()
    first = build_project(project, tflm_tree, cache_dir=tflm_cache)
    first_seconds = time.perf_counter() - start
    again = out / "client1-again"
    shutil.copytree(project, again, ignore=shutil.ignore_patterns("build", "main"))
    start = time.perf_counter()
    cached = build_project(again, tflm_tree, cache_dir=tflm_cache)
    print(f"\nhost build: first {first_seconds:.0f} s, cached {time.perf_counter() - start:.0f} s")
    assert cached.library_was_cached and cached.library == first.library

    text = (project / "test_vectors.h").read_text()
    header = (project / "model_client1_int8.h").read_text()
    count = c_constant(text, "kclient1_int8_test_count")
    inputs = c_array(text, "kclient1_int8_test_inputs").reshape(count, 1, 128, 9).astype(np.int8)
    content = (out / "client1" / "int8.tflite").read_bytes()
    python = micro_outputs(content, inputs[:, 0], c_constant(header, "kclient1_int8_arena_size"))
    for run in (first.run, cached.run):
        assert run.returncode == 0, run.output
        assert run.output.rstrip().endswith(f"matched {count} of {count}")
        assert len(run.outputs) == count >= 1
        np.testing.assert_array_equal(np.stack(run.outputs), python)
        assert run.predicted == list(python.argmax(-1))

    # a second make has nothing to do, and the model object defines only its own names
    make = ["make", "-C", str(project), f"TFLM_DIR={tflm_tree}", f"TFLM_LIB={first.library}"]
    assert subprocess.run([*make, "-q", "main"], capture_output=True).returncode == 0
    model_object = project / "build" / "host" / "app" / "model_client1_int8.o"
    nm = ["nm", "-C", "--defined-only", "--extern-only", str(model_object)]
    symbols = subprocess.run(nm, capture_output=True, text=True, check=True).stdout
    strong = [line.split(" ", 2)[2] for line in symbols.splitlines() if line.split()[1] in "TDRB"]
    assert strong and all("client1_int8" in name for name in strong), strong


TWO_MODELS = """\
#include <stdio.h>
#include <string.h>

#include "client1/micro_int8/model_client1_int8.h"
#include "client1/micro_int8/test_vectors.h"
#include "client2/micro_int8/model_client2_int8.h"
#include "client2/micro_int8/test_vectors.h"
#include "tensorflow/lite/micro/micro_interpreter.h"

#define RUN(ID)                                                                          \\
  {                                                                                      \\
    alignas(16) static uint8_t arena[k##ID##_arena_size];                                \\
    static tflite::MicroMutableOpResolver<k##ID##_op_count> resolver;                    \\
    if (ID##_register_ops(resolver) != kTfLiteOk) return 2;                              \\
    static tflite::MicroInterpreter interpreter(tflite::GetModel(ID##_model), resolver,  \\
                                                arena, k##ID##_arena_size);              \\
    if (interpreter.AllocateTensors() != kTfLiteOk) return 2;                            \\
    int matched = 0;                                                                     \\
    for (int w = 0; w < k##ID##_test_count; ++w) {                                       \\
      memcpy(interpreter.input(0)->data.data, k##ID##_test_inputs[w],                    \\
             sizeof(k##ID##_test_inputs[w]));                                            \\
      if (interpreter.Invoke() != kTfLiteOk) return 2;                                   \\
      matched += memcmp(interpreter.output(0)->data.data, k##ID##_test_expected[w],      \\
                        sizeof(k##ID##_test_expected[w])) == 0;                          \\
    }                                                                                    \\
    printf(#ID " matched %d of %d\\n", matched, k##ID##_test_count);                     \\
  }

int main() {
  RUN(client1_int8)
  RUN(client2_int8)
  return 0;
}
"""


@pytest.mark.slow
def test_two_clients_link_into_one_program(exported, tflm_tree, tflm_cache, tmp_path):
    from edge_export.micro.build import compile_program, tflm_library

    out, _ = exported
    first = out / "client1" / "micro_int8"
    library, _, _ = tflm_library(first, tflm_tree, cache_dir=tflm_cache)
    main = tmp_path / "two_models.cc"
    main.write_text(TWO_MODELS)
    sources = [
        main,
        first / "model_client1_int8.cc",
        out / "client2/micro_int8/model_client2_int8.cc",
    ]
    program = compile_program(sources, [out], tflm_tree, library, tmp_path / "two_models")
    result = subprocess.run([str(program)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(" matched")[0] for line in lines] == ["client1_int8", "client2_int8"]
    for line in lines:
        k, n = re.search(r"matched (\d+) of (\d+)", line).groups()
        assert k == n and int(n) >= 1, line


# -- slow: the docs' commands, as written --------------------------------------------------------


def doc_commands() -> list[str]:
    """The commands of the block after the docs' marker (continued lines joined)."""
    lines = DOC.read_text().splitlines()
    start = lines.index(DOC_MARKER)
    assert lines[start + 1].strip() == "```bash", f"{DOC_MARKER} must precede a ```bash block"
    end = next(i for i in range(start + 2, len(lines)) if lines[i].strip() == "```")
    block = re.sub(r"\\\n\s*", " ", "\n".join(lines[start + 2 : end]))
    return [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines() if line.strip()]


def doc_workspace(tmp_path: Path, monkeypatch, **trees: Path) -> tuple[Path, list[str]]:
    """A folder to run the docs' commands in (the current directory from now on), beside
    ``../shared/tflm/<name>`` links to ``trees``, and the options the programs get: fixture
    UCI-HAR data and no progress bars."""
    from tests.test_smoke_commands import uci_har

    data = tmp_path / "data"
    uci_har(data)
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "shared" / "tflm").mkdir(parents=True)
    for name, tree in trees.items():
        (tmp_path / "shared" / "tflm" / name).symlink_to(tree)
    monkeypatch.chdir(work)
    return work, ["--data-dir", str(data), "--no-progress"]


@pytest.mark.slow
def test_the_docs_commands_run_from_training_to_a_host_binary(
    tflm_tree, tflm_cache, tmp_path, monkeypatch
):
    """The block's commands, word for word, in a folder with ``../shared/tflm/tree`` (a link to
    the tree): ``fedprune`` and ``edge-export`` get ``--data-dir`` (fixture UCI-HAR data) and
    ``--no-progress``; make gets ``TFLM_LIB`` from the environment, the TFLM library the other
    builds compiled, so it compiles only the project's own files."""
    from edge_export.cli import main as edge_export
    from edge_export.micro.build import tflm_library
    from fedprune.cli import main as fedprune

    commands = doc_commands()
    assert [c.split()[0] for c in commands] == [
        "fedprune",
        "edge-export",
        "make",
        commands[-1].split()[0],
    ]
    work, extra = doc_workspace(tmp_path, monkeypatch, tree=tflm_tree)
    train, export, make, run = commands
    assert fedprune([*shlex.split(train)[1:], *extra]) == 0
    assert edge_export([*shlex.split(export)[1:], *extra]) == 0
    project = work / shlex.split(make)[2]
    library, _, _ = tflm_library(project, tflm_tree, cache_dir=tflm_cache)
    env = {**os.environ, "TFLM_LIB": str(library)}
    built = subprocess.run(["bash", "-c", make], cwd=work, env=env, capture_output=True, text=True)
    assert built.returncode == 0, built.stdout + built.stderr
    result = subprocess.run(["bash", "-c", run], cwd=work, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    last = result.stdout.splitlines()[-1]
    assert re.fullmatch(r"matched (\d+) of \1", last), last
    after = DOC.read_text().split(DOC_MARKER, 1)[1]
    assert re.search(r"`matched (\d+) of \1`", after), "the docs state the expected last line"
