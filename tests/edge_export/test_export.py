import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from edge_export.cli import main
from edge_export.formats import FORMATS
from edge_export.micro import MicroExport, write_c_array
from fedprune.data.registry import load_federated
from fedprune.models.cnn1d import build_har_cnn
from fedprune.runs import RunDir, names
from fedprune.runs.npz import read_arrays
from tests.conftest import har_arrays, write_uci_har
from tests.edge_export.conftest import EXPORTED_CLIENT

pytestmark = pytest.mark.slow


# Each format's file, run by the TFLite interpreter on client 2's test windows, against the
# Keras model it was converted from: (least agreement of the predicted class, largest
# |p_tflite - p_keras|). Float formats agree exactly; integer ones may flip one near-tie window
# of the six. int8-qat is compared with the original (not the fine-tuned) Keras model.
# Measured (oneDNN off): every format agrees on all six windows; max differences 4e-8
# (float32), 1.5e-5 (float16), 7e-5 (dynamic), 2.2e-3 (int8), 2.5e-3 (int8-qat), 4e-4
# (int16x8); the bounds leave a margin of 10-20x.
TOLERANCE = {
    "float32": (1.0, 1e-6),
    "float32-sparse": (1.0, 1e-6),
    "float16": (1.0, 1e-3),
    "dynamic": (1.0, 1e-3),
    "int8": (0.8, 0.05),
    "int8-sparse": (0.8, 0.05),
    "int8-float-head": (0.8, 0.05),
    "int8-qat": (0.8, 0.05),
    "int8-qat-sparse": (0.8, 0.05),
    "int16x8": (0.8, 0.01),
}


def _fedavg_run(root):
    """A finished FedAvg run directory written by hand (random but fixed weights), its data
    directory (the UCI-HAR zip of ``fixture_data_dir``) and the Keras model of its weights."""
    data_dir = root / "data"
    (data_dir / "uci_har").mkdir(parents=True)
    write_uci_har(data_dir / "uci_har", *har_arrays(6, subjects=tuple(range(1, 7))), as_zip=True)
    config = {
        "method": "fedavg",
        "dataset": "uci_har",
        "seed": 0,
        "standardize": False,
        "split": "time-ordered",  # what load_federated below splits by default
    }
    run = RunDir(root / "run", config)
    data = load_federated("uci_har", 0, data_dir, verbose=False)
    model = build_har_cnn((128, 9), 6, seed=0)
    model.compile("adam", "sparse_categorical_crossentropy")
    x = np.concatenate([c.x_train for c in data.clients])
    y = np.concatenate([c.y_train for c in data.clients])
    model.fit(x, y, epochs=15, verbose=0)  # a clear decision per window, as after training
    rng = np.random.default_rng(0)
    weights = [w * (rng.random(w.shape) > 0.7) if w.ndim > 1 else w for w in model.get_weights()]
    model.set_weights(weights)
    run.save_checkpoint(1, {"trainable": weights, "non_trainable": []})
    run.write_summary({"method": "fedavg"})
    return run.path, data_dir, model, data


def _micro_export(
    tmp_path_factory, every_format_export, clients: str, formats: str
) -> tuple[Path, list[dict]]:
    """The trained FedAvg run of ``conftest.every_format_export`` (made once per test run, only
    read here): its ``clients`` exported as ``formats`` with ``--micro``: the export folder and
    its ``export_report.json``."""
    run_dir, data_dir, _, _ = every_format_export
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FEDPRUNE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        out = tmp_path_factory.mktemp("export")
        args = [str(run_dir), "--clients", clients, "--formats", formats, "--micro"]
        assert main(args + ["--out", str(out), "--data-dir", str(data_dir), "--no-progress"]) == 0
    return out, json.loads((out / "export_report.json").read_text())


@pytest.fixture(scope="module")
def trained_run(every_format_export):
    """The shared run (``conftest.every_format_export``): its directory, data directory, the
    Keras model of its weights and its federated data."""
    run_dir, data_dir, _, _ = every_format_export
    data = load_federated("uci_har", 0, data_dir, verbose=False)
    model = build_har_cnn((128, 9), 6, seed=0)
    checkpoint = read_arrays(run_dir / names.CHECKPOINT)
    model.set_weights([checkpoint[f"trainable__{i}"] for i in range(checkpoint["trainable__n"])])
    return run_dir, data_dir, model, data


@pytest.fixture
def fedavg_run(trained_run):
    run_dir, data_dir, _, _ = trained_run
    return run_dir, data_dir


@pytest.fixture(scope="module")
def every_format(every_format_export):
    """Client 2 exported once in every format: the export directory and its report."""
    _, _, out, report = every_format_export
    return out, report


def test_tolerances_cover_every_format():
    assert set(TOLERANCE) == set(FORMATS)


@pytest.mark.parametrize("fmt", FORMATS)
def test_format_loads_in_tflite_and_agrees_with_keras(fmt, trained_run, every_format):
    from edge_export.verify import run_tflite, runtime_loads

    _, _, model, data = trained_run
    out, _ = every_format
    (client,) = [c for c in data.clients if c.client_id == EXPORTED_CLIENT]
    content = (out / f"client{EXPORTED_CLIENT}" / f"{fmt}.tflite").read_bytes()
    meta = json.loads((out / f"client{EXPORTED_CLIENT}" / f"{fmt}.json").read_text())
    x = client.x_test
    if meta["normalization"] is not None:  # what the device applies to raw windows
        x = (x - np.array(meta["normalization"]["offset"])) / meta["normalization"]["scale"]
    probs, _ = run_tflite(content, x.astype(np.float32))
    keras_probs = model.predict(client.x_test, verbose=0)
    min_agreement, max_prob_diff = TOLERANCE[fmt]
    assert np.mean(probs.argmax(-1) == keras_probs.argmax(-1)) >= min_agreement
    assert np.max(np.abs(probs - keras_probs)) <= max_prob_diff
    assert runtime_loads(content) is not False  # tflite-runtime, where installed


def test_predictions_file_holds_every_test_window_per_format(trained_run, every_format):
    import csv

    _, _, _, data = trained_run
    out, report = every_format
    (client,) = [c for c in data.clients if c.client_id == EXPORTED_CLIENT]
    with (out / "predictions.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["client", "window", "label", "keras", *FORMATS]
    assert [int(r["window"]) for r in rows] == list(range(len(client.y_test)))
    assert [int(r["label"]) for r in rows] == [int(y) for y in client.y_test]
    for entry in report:  # each column's disagreements with Keras are the report's flips
        fmt = entry["format"]
        flipped = sum(r[fmt] != r["keras"] for r in rows)
        assert flipped == entry["flipped_windows"], fmt
        assert sum(r[fmt] == r["label"] for r in rows) / len(rows) == pytest.approx(
            entry["tflite_acc"]
        )


def test_int8_files_record_the_measured_preparation(every_format):
    out, report = every_format
    client = out / f"client{EXPORTED_CLIENT}"
    chosen = {}
    for fmt in ("int8", "int8-sparse"):
        record = json.loads((client / f"{fmt}.json").read_text())["calibration"]
        assert set(record["candidates"]) == {"plain", "equalized", "half-equalized"}
        best = min(
            record["candidates"],
            key=lambda n: (
                record["candidates"][n]["flipped"],
                record["candidates"][n]["margin_rms"],
            ),
        )
        assert record["chosen"] == best and record["held_out_windows"] >= 1
        chosen[fmt] = record["chosen"]
    assert chosen["int8"] == chosen["int8-sparse"]  # measured once per client
    by_format = {e["format"]: e for e in report}
    assert by_format["int8"]["calibration"] == chosen["int8"]
    assert "calibration" not in by_format["int16x8"]
    assert "int8 preparation" in (out / "export_report.md").read_text()


def test_formats_differ_as_designed(every_format):
    """Sizes, sparse encodings and metadata across the formats of one export."""
    out, report = every_format
    assert [e["format"] for e in report] == list(FORMATS)
    by_format = {e["format"]: e for e in report}
    assert by_format["float32"]["max_prob_diff"] < 1e-5
    assert by_format["float32"]["agreement"] == 1.0
    assert by_format["float16"]["bytes"] < 0.6 * by_format["float32"]["bytes"]
    assert by_format["int8"]["bytes"] < 0.35 * by_format["float32"]["bytes"]
    assert by_format["int8-sparse"]["sparse_encoded"] and not by_format["int8"]["sparse_encoded"]
    assert by_format["int8-sparse"]["bytes"] < by_format["int8"]["bytes"]
    assert by_format["int8"]["sparsity"] > 0.69
    assert by_format["int8-qat-sparse"]["sparse_encoded"]
    assert by_format["int8-qat-sparse"]["bytes"] < by_format["int8-qat"]["bytes"]
    int16 = by_format["int16x8"]
    assert int16["bytes"] < 1.1 * by_format["int8"]["bytes"]  # int8 weights
    assert int16["max_prob_diff"] < by_format["int8"]["max_prob_diff"]
    assert int16["agreement"] >= by_format["int8"]["agreement"]
    client = out / f"client{EXPORTED_CLIENT}"
    meta16 = json.loads((client / "int16x8.json").read_text())
    assert meta16["input"]["dtype"] == "int16" and meta16["output"]["dtype"] == "int16"
    qat_meta = json.loads((client / "int8-qat.json").read_text())
    assert qat_meta["quantization_aware"] == {"epochs": 1, "learning_rate": 1e-4}
    meta = json.loads((client / "int8.json").read_text())
    assert meta["input"]["dtype"] == "int8" and meta["input"]["quantization"]["scale"] > 0
    assert meta["labels"][0] == "WALKING"
    # post-training integer files take per-channel scaled windows; the device map is recorded
    assert meta["input_scaling"] == "per-channel" and len(meta["normalization"]["offset"]) == 9
    assert meta["logit_range"][0] < 0 < meta["logit_range"][1]
    assert meta16["input_scaling"] == "per-channel" and meta16["logit_range"] is None
    assert qat_meta["input_scaling"] == "per-tensor" and qat_meta["normalization"] is None
    float_meta = json.loads((client / "float32.json").read_text())
    assert float_meta["normalization"] is None and float_meta["input_scaling"] == "per-tensor"


def test_per_tensor_input_and_full_logit_range_convert_the_model_as_it_is(fedavg_run, tmp_path):
    from edge_export.micro import builtin_ops

    run_dir, data_dir = fedavg_run
    out = tmp_path / "export"
    args = [str(run_dir), "--clients", "2", "--formats", "int8", "--out", str(out)]
    args += ["--input-scaling", "per-tensor", "--logit-range", "full"]
    assert main(args + ["--data-dir", str(data_dir), "--no-progress"]) == 0
    meta = json.loads((out / "client2" / "int8.json").read_text())
    assert meta["input_scaling"] == "per-tensor" and meta["logit_range"] is None
    assert meta["normalization"] is None
    assert "CONCATENATION" not in builtin_ops((out / "client2" / "int8.tflite").read_bytes())


def test_micro_project_and_measured_arena(fedavg_run, tmp_path):
    run_dir, data_dir = fedavg_run
    out = tmp_path / "export"
    rc = main(
        [
            str(run_dir),
            "--clients",
            "3",
            "--formats",
            "float32",
            "--micro",
            "--out",
            str(out),
            "--data-dir",
            str(data_dir),
            "--no-progress",
        ]
    )
    assert rc == 0
    report = json.loads((out / "export_report.json").read_text())
    entry = next(e for e in report if e["format"] == "int8")
    assert entry["micro_arena_measured"] and 4_096 < entry["micro_arena_bytes"] <= 64 * 1024
    assert entry["micro_ops"][-1] == "SOFTMAX"
    assert entry["tflite_runtime_loads"] is True
    assert entry["micro_project"] == "client3/micro_int8"
    assert entry["micro_arena_headroom_bytes"] >= 1024
    project = out / "client3" / "micro_int8"
    source = (project / "model_client3_int8.cc").read_text()
    assert "alignas(16) const unsigned char client3_int8_model[]" in source
    assert "resolver.AddConcatenation()" in source
    header = (project / "model_client3_int8.h").read_text()
    assert "kclient3_int8_input_offset[9]" in header
    assert f"kclient3_int8_arena_minimum = {entry['micro_arena_bytes']};" in header
    for name in ("test_vectors.h", "main.cc", "Makefile", "README.md"):
        assert (project / name).is_file()


@pytest.mark.skipif(
    shutil.which("g++") is None,
    reason="no g++ on this machine: install a C++17 compiler to check the micro C arrays compile",
)
def test_micro_c_array_compiles_with_gxx(tmp_path):
    """The generated header and source (model array, arena size, normalization constants)
    are valid C++17: compiled, and the object file defines the model symbols."""
    normalization = {"offset": [0.5, -1.0, 0.0], "scale": [2.0, 1.0, 0.25], "apply": "x"}
    arena = MicroExport(ops=["CONV_2D", "SOFTMAX"], arena_bytes=20_000, arena_measured=True)
    header, source = write_c_array(
        bytes(range(40)), tmp_path / "m", "client 7", ["CONV_2D", "SOFTMAX"], arena, normalization
    )
    subprocess.run(
        ["g++", "-std=c++17", "-c", str(source), "-o", str(tmp_path / "m.o")], check=True
    )
    symbols = subprocess.run(
        ["nm", "-C", str(tmp_path / "m.o")], capture_output=True, text=True, check=True
    ).stdout
    assert "client_7_len" in symbols and "client_7" in symbols


def test_micro_array_of_the_quantization_aware_model(fedavg_run, tmp_path):
    run_dir, data_dir = fedavg_run
    out = tmp_path / "export"
    args = [str(run_dir), "--clients", "1", "--micro", "--qat-epochs", "1", "--out", str(out)]
    args += ["--formats", "float32,int8-qat"]
    assert main(args + ["--data-dir", str(data_dir), "--no-progress"]) == 0
    report = json.loads((out / "export_report.json").read_text())
    assert [e["format"] for e in report] == ["float32", "int8-qat"]  # no int8 added
    assert report[1]["micro_project"] == "client1/micro_int8_qat"
    assert report[1]["micro_path"] == "client1/micro_int8_qat/model_client1_int8_qat.cc"
    assert (out / "client1" / "micro_int8_qat" / "model_client1_int8_qat.h").exists()


def test_micro_array_of_the_int16x8_model(fedavg_run, tmp_path):
    run_dir, data_dir = fedavg_run
    out = tmp_path / "export"
    args = [str(run_dir), "--clients", "1", "--micro", "--formats", "int16x8", "--out", str(out)]
    assert main(args + ["--data-dir", str(data_dir), "--no-progress"]) == 0
    (entry,) = json.loads((out / "export_report.json").read_text())
    assert entry["format"] == "int16x8" and entry["micro_arena_measured"]
    assert entry["micro_arena_bytes"] <= 64 * 1024
    project = out / "client1" / "micro_int16x8"
    header = (project / "model_client1_int16x8.h").read_text()
    assert "typedef int16_t client1_int16x8_input_t;" in header
    vectors = (project / "test_vectors.h").read_text()
    assert "constexpr client1_int16x8_output_t kclient1_int16x8_test_expected" in vectors


def test_micro_refuses_sparse_tensors(fedavg_run):
    from edge_export.convert import to_tflite
    from edge_export.micro import check_micro_compatible
    from fedprune.errors import ConfigError

    run_dir, _ = fedavg_run
    from fedprune.models.cnn1d import build_har_cnn as build

    model = build((128, 9), 6, seed=0)
    rng = np.random.default_rng(0)
    model.set_weights(
        [w * (rng.random(w.shape) > 0.8) if w.ndim > 1 else w for w in model.get_weights()]
    )
    with pytest.raises(ConfigError, match="sparse"):
        check_micro_compatible(to_tflite(model, "float32-sparse"))


def test_missing_run_is_one_line(tmp_path, capsys):
    assert main([str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "not a fedprune run directory" in err and err.count("\n") == 1


def test_unknown_client_and_format(fedavg_run, tmp_path, capsys):
    run_dir, data_dir = fedavg_run
    args = [str(run_dir), "--out", str(tmp_path / "o"), "--data-dir", str(data_dir)]
    assert main(args + ["--clients", "99"]) == 2
    assert "no client 99" in capsys.readouterr().err
    assert main(args + ["--formats", "int4"]) == 2
    assert "unknown format" in capsys.readouterr().err
    assert main(args + ["--formats", "int16x8-sparse"]) == 2  # TFLite computes it wrongly
    assert "unknown format" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(args + ["--formats", "int8-qat", "--qat-epochs", "0"])
    assert "--qat-epochs: must be >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(args + ["--formats", "int8-qat", "--qat-lr=-1e-4"])
    assert "--qat-lr: must be > 0" in capsys.readouterr().err


def test_int8_calibrates_on_every_training_window():
    from edge_export.convert import _representative

    x = np.random.default_rng(0).normal(size=(357, 128, 9)).astype(np.float32)
    steps = list(_representative(x)())
    assert len(steps) == 357 and steps[-1][0].shape == (1, 128, 9)
    np.testing.assert_array_equal(steps[-1][0][0], x[-1])


def test_int8_without_windows_is_an_error():
    from edge_export.convert import to_tflite
    from fedprune.errors import ConfigError

    model = build_har_cnn((128, 9), 6, seed=0)
    with pytest.raises(ConfigError, match="int8 conversion needs representative windows"):
        to_tflite(model, "int8", np.zeros((0, 128, 9), np.float32))


def test_report_counts_flipped_windows_and_summarizes_formats():
    from edge_export.export import report_markdown

    entry = {
        "client": 1,
        "format": "int8",
        "bytes": 2048,
        "gzip_bytes": 1024,
        "sparse_encoded": False,
        "keras_acc": 0.9,
        "tflite_acc": 0.88,
        "acc_delta": -0.02,
        "agreement": 0.98,
        "test_windows": 50,
        "flipped_windows": 1,
        "max_prob_diff": 0.1,
        "latency_ms": 0.02,
        "latency_ref_ms": 0.5,
    }
    text = report_markdown([entry, {**entry, "client": 2, "flipped_windows": 0, "acc_delta": 0}])
    assert "| 1/50 |" in text
    # flipped (tied; clients beyond 1 pp), then the most windows one client lost
    assert "| int8 | 2 | 2.0 / 2.0 / 2.0 | 1.0 | -2.0 / +0.0 | 1/100 (0; 1) | 1 |" in text
