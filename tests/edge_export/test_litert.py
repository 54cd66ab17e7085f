"""LiteRT (``ai-edge-litert``), the runtime a Raspberry Pi or Android user installs, runs every
exported file as the report says: loads with its default interpreter or, where it refuses a
file, with the op resolver the report names; windows agreeing with ``predictions.csv``."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from edge_export.formats import FORMATS
from edge_export.verify import (
    FALLBACK_RESOLVER,
    RUNTIMES,
    device_run,
    quantize,
    time_together,
)
from tests.edge_export.conftest import EXPORTED_CLIENT

# the formats whose fully connected layers get a DENSIFY op (per-weight masks): LiteRT 2.1-2.3's
# default XNNPACK delegate refuses an int8 FULLY_CONNECTED fed by one ("failed to prepare")
REFUSED = ("int8-sparse", "int8-qat-sparse")


def _litert():
    return pytest.importorskip(
        "ai_edge_litert.interpreter",
        reason="ai-edge-litert is not installed (requirements/stack-nodeps.txt installs it)",
    )


def _classes(module, content: bytes, x: np.ndarray, resolver: str | None) -> np.ndarray:
    """The class of every window of ``x`` from a 1-thread LiteRT interpreter (the default one
    when ``resolver`` is None); raises what LiteRT raises when it refuses the file."""
    options = {}
    if resolver is not None:
        options["experimental_op_resolver_type"] = getattr(module.OpResolverType, resolver)
    interpreter = module.Interpreter(model_content=content, num_threads=1, **options)
    interpreter.allocate_tensors()
    inp, out = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    classes = []
    for window in x:
        interpreter.set_tensor(inp["index"], quantize(window[None], inp))
        interpreter.invoke()
        classes.append(int(np.argmax(interpreter.get_tensor(out["index"])[0])))
    return np.asarray(classes)


@pytest.fixture(scope="module")
def exported(every_format_export):
    """A trained, 70 % per-weight pruned FedAvg run's client 2 exported in every format
    (``conftest.every_format_export``): the run's data, the export folder and its report."""
    from fedprune.data.registry import load_federated

    _litert()
    _, data_dir, out, report = every_format_export
    return load_federated("uci_har", 0, data_dir, verbose=False), out, report


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_litert_loads_each_format_as_the_report_says(fmt, exported):
    module = _litert()
    data, out, report = exported
    (entry,) = [e for e in report if e["format"] == fmt]
    (client,) = [c for c in data.clients if c.client_id == EXPORTED_CLIENT]
    content = (out / entry["path"]).read_bytes()
    meta = json.loads((out / entry["path"]).with_suffix(".json").read_text())
    x = client.x_test
    if meta["normalization"] is not None:  # what the device applies to raw windows
        x = (x - np.array(meta["normalization"]["offset"])) / meta["normalization"]["scale"]
    x = x.astype(np.float32)
    try:
        classes = _classes(module, content, x, None)
        loads = True
    except RuntimeError:
        loads = False
        classes = _classes(module, content, x, FALLBACK_RESOLVER)
    record = entry["litert"]
    assert record["loads"] is loads
    assert loads is (fmt not in REFUSED)
    assert record["resolver"] == ("default" if loads else FALLBACK_RESOLVER)
    assert ("XNNPack" in record["error"]) is not loads
    with (out / "predictions.csv").open() as handle:
        rows = [r for r in csv.DictReader(handle) if int(r["client"]) == EXPORTED_CLIENT]
    column = np.array([int(r[fmt]) for r in rows])
    assert record["windows"] == len(column) == len(x)
    assert record["agreeing_windows"] == int(np.sum(classes == column))
    assert record["agreeing_windows"] >= len(x) - 1  # int8 runtimes differ by at most 1 LSB
    assert record["latency_ms"] > 0 and record["invokes"] >= 200 and record["threads"] == 1
    assert record["cpu"]
    assert entry["tflite_runtime"]["loads"] is entry["tflite_runtime_loads"] is not False
    assert entry["cortex_m"] == {}


@pytest.mark.slow
def test_the_report_marks_what_the_default_interpreter_refuses(exported):
    _, out, report = exported
    text = (out / "export_report.md").read_text()
    lines = text.splitlines()
    column = [c.strip() for c in lines[0].split("|")].index("LiteRT")
    cells = [[c.strip() for c in line.split("|")] for line in lines if line.startswith("| 2 |")]
    rows = {row[2]: row for row in cells}  # by format
    for fmt in FORMATS:
        cell = rows[fmt][column]
        if fmt in REFUSED:
            assert cell.startswith(f"**not with default delegates**; {FALLBACK_RESOLVER}: ")
            assert f"- {fmt}: ai-edge-litert " in text
        else:
            assert cell.startswith("loads, ")
    assert f"experimental_op_resolver_type=OpResolverType.{FALLBACK_RESOLVER}" in text
    assert "1 thread, median of" in text


@pytest.mark.slow
def test_files_timed_together_get_a_time_each_where_the_default_interpreter_runs_them(exported):
    """One interleaved pass over every format's file (the device study's LiteRT column): a
    time per file, none for the files LiteRT's default interpreter refuses."""
    _, out, report = exported
    entries = [e for e in report if e["client"] == 2]
    timed = time_together([(out / e["path"]).read_bytes() for e in entries], rounds=3, invokes=7)
    assert (timed.rounds, timed.invokes) == (3, 7) and timed.runtime.startswith("ai-edge-litert ")
    for entry, latency in zip(entries, timed.latency_ms, strict=True):
        if entry["format"] in REFUSED:
            assert latency is None
        else:
            assert latency is not None and 0 < latency < 1000, entry["format"]


@pytest.mark.slow
def test_block_sparse_dense_layers_keep_int8_sparse_loading_in_litert():
    """A dense kernel pruned in blocks of 16 inputs stays sparse in the file (the int8 FULLY_
    CONNECTED reads it, no DENSIFY), and LiteRT's default interpreter runs it; the same layer
    pruned per weight gets a DENSIFY op and is refused (``--block 16`` is the layout to use)."""
    _litert()
    from tensorflow.lite.python import schema_py_generated as schema

    from edge_export.convert import to_tflite
    from fedprune.models.cnn1d import build_har_cnn

    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 128, 9)).astype(np.float32)

    def densified(content: bytes) -> int:
        model = schema.ModelT.InitFromPackedBuf(content, 0)
        codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in model.operatorCodes]
        ops = [codes[op.opcodeIndex] for op in model.subgraphs[0].operators]
        return ops.count(schema.BuiltinOperator.DENSIFY)

    results = {}
    for block in (16, 1):
        model = build_har_cnn((128, 9), 6, seed=0)
        weights = []
        for w in model.get_weights():
            if w.ndim == 2:  # dense kernel [fan_in, units]: blocks of `block` inputs per unit
                keep = rng.random((-(-w.shape[0] // block), w.shape[1])) > 0.7
                w = w * np.repeat(keep, block, axis=0)[: w.shape[0]]
            elif w.ndim == 3:
                w = w * (rng.random(w.shape) > 0.7)
            weights.append(w)
        model.set_weights(weights)
        content = to_tflite(model, "int8-sparse", x)
        results[block] = (densified(content), device_run("litert", content, x[:4], invokes=0))
    (dense_16, run_16), (dense_1, run_1) = results[16], results[1]
    assert dense_16 == 2 and run_16.loads and run_16.resolver == "default"  # the two convs
    assert dense_1 == 4 and run_1.loads is False and run_1.resolver == FALLBACK_RESOLVER
    assert "FULLY_CONNECTED" in run_1.error and len(run_1.predictions) == 4


def test_a_runtime_that_is_not_installed_is_reported_so(monkeypatch):
    from edge_export.export import report_markdown

    monkeypatch.setitem(RUNTIMES, "litert", ("ai-edge-litert", "no_such_module.interpreter"))
    run = device_run("litert", b"not read", np.zeros((1, 4), np.float32))
    assert run.loads is None and run.predictions is None and run.latency_ms is None
    entry = {
        "client": 1, "format": "int8", "bytes": 2048, "gzip_bytes": 1024,
        "sparse_encoded": False, "keras_acc": 0.9, "tflite_acc": 0.9, "acc_delta": 0.0,
        "agreement": 1.0, "max_prob_diff": 0.0, "latency_ms": 0.02, "latency_ref_ms": 0.5,
        "litert": {"runtime": "", "loads": None},
        "tflite_runtime": {
            "runtime": "tflite-runtime 2.14.0", "loads": True, "resolver": "default",
            "error": "", "agreeing_windows": 49, "windows": 50,
        },
        "cortex_m": {},
    }  # fmt: skip
    text = report_markdown([entry])
    assert "| not installed | loads, 49/50 |" in text
    assert "| int8 | 2.0 | (--micro) | (--micro) | ? |  |" in text  # the budget: no LiteRT
    assert "LiteRT:" not in text and "refuses" not in text
