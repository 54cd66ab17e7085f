"""``fedprune reproduce device`` end to end on the fixture UCI-HAR with a short schedule: every
setting is trained and exported for real (edge-export: int8 per client, TFLite Micro arena,
LiteRT), its row has the device columns, the structured and small models' files are smaller
than the paper model's, and a second invocation trains and exports nothing while an export
left incomplete is made again. The Cortex-M builds are left out here (their TFLite Micro and
CMSIS-NN objects take many CPU-minutes; tests/edge_export/test_cortex_m.py builds them): the
table must say that they were not measured and why."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import shutil
import subprocess

import numpy as np
import pytest
from matplotlib.image import imread

from fedprune.data.sources import sha256_of
from fedprune.errors import DataError
from fedprune.reproduce import device
from fedprune.reproduce import study as S
from tests.conftest import har_arrays, write_uci_har

pytestmark = pytest.mark.slow

# Table 2's cell shortened: 2 masked rounds, masks from the first, 1 fine-tuning epoch
SCHEDULE = (
    *("--split", "time-ordered", "--ft-epochs", "1", "--phases", "0,0,2"),
    *("--prune-frequency", "1", "--clusters", "2", "--clients-per-round", "3"),
    *("--local-epochs", "1"),
)


def _study() -> S.Study:
    return dataclasses.replace(
        device.STUDY,
        datasets=("uci_har",),
        points=lambda quick: device.grid(("uci_har",), SCHEDULE),
    )


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory):
    """The fixture data, the study's --out after one ``--quick`` reproduction, and its rows."""
    root = tmp_path_factory.mktemp("device")
    data = root / "data"
    (data / "uci_har").mkdir(parents=True)
    write_uci_har(data / "uci_har", *har_arrays(6, subjects=tuple(range(1, 7))), as_zip=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FEDPRUNE_CACHE_DIR", str(root / "cache"))
        patch.setenv(device.TFLM_ENV, str(root / "no-tflm"))
        S.reproduce(_study(), root / "out", quick=True, data_dir=str(data))
    with open(root / "out" / "device_quick.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return data, root / "out", rows


def _row(rows: list[dict], setting: device.Setting) -> dict:
    (row,) = [r for r in rows if all(r[k] == v for k, v in setting.labels)]
    return row


def test_every_setting_has_a_row_with_its_device_columns(reproduced):
    _, out, rows = reproduced
    assert len(rows) == len(device.SETTINGS)  # one dataset, one fine-tuning length
    for setting in device.SETTINGS:
        row = _row(rows, setting)
        assert row["dataset"] == "uci_har" and row["ft"] == "1" and row["seeds"] == "1"
        for name in ("acc", "int8_acc", "int8_kb", "arena_kb", "litert_us"):
            assert float(row[name]) > 0, (setting, name)
        assert row["litert_loads"] == "6/6"  # every client's int8 file loads in LiteRT
        assert "every file of 5 runs timed together" in row["litert"]
        assert row["m4_cmsis_nn_minstr"] == ""  # not built, and said so
        assert row["cortex_m"].startswith("not measured: no TFLite Micro tree at")
    text = (out / "device_quick.md").read_text()
    assert text.count("not measured¹") == len(device.SETTINGS) * 4
    assert f"¹ {device.CORTEX_M}: not measured: no TFLite Micro tree at" in text
    assert "Pareto front" in text and "yes" in text
    (timed,) = json.loads((out / "exports" / device.TIMES).read_text())["passes"]
    times = timed["latency_ms"]
    assert len(times) == 5 * 6 and all(t > 0 for t in times.values())  # 5 runs x 6 clients
    assert (out / "device_quick.png").stat().st_size > 10_000
    height, width = imread(out / "device_quick.png").shape[:2]
    assert width < 1.8 * height  # one panel (6 x 4.8 in), not an empty one per other dataset
    for point in _study().points(True):
        report = device.export_dir(S.run_dir(out, device.STUDY, point, 0)) / device.REPORT
        assert report.is_file(), point.stem


def test_structured_and_small_models_cost_less_than_the_paper_model(reproduced):
    _, _, rows = reproduced
    size = {s: float(_row(rows, s)["int8_kb"]) for s in device.SETTINGS}
    arena = {s: float(_row(rows, s)["arena_kb"]) for s in device.SETTINGS}
    half, seventy, most = device.STRUCTURED
    assert size[most] < size[seventy] < size[half] < size[device.PAPER]
    assert size[device.SMALL] < size[device.PAPER]
    assert arena[half] < arena[device.PAPER] and arena[device.SMALL] < arena[device.PAPER]


def test_a_second_invocation_trains_and_exports_only_what_is_missing(
    reproduced, monkeypatch, capsys
):
    data, out, _ = reproduced
    points = _study().points(True)
    reports = [
        device.export_dir(S.run_dir(out, device.STUDY, p, 0)) / device.REPORT for p in points
    ]
    before = {r: r.stat().st_mtime_ns for r in reports}
    monkeypatch.setattr(S.runner._Children, "run", lambda *a, **k: pytest.fail("retrained"))
    monkeypatch.setenv(device.TFLM_ENV, str(out / "no-tflm"))
    exported = []

    def export(command, **kwargs):
        if "edge_export.cli" in command:
            exported.append(command)
        return original(command, **kwargs)

    original = subprocess.run
    monkeypatch.setattr(device.subprocess, "run", export)
    S.reproduce(_study(), out, quick=True, data_dir=str(data))
    assert exported == [] and {r: r.stat().st_mtime_ns for r in reports} == before
    assert capsys.readouterr().err.count(": exported") == len(points)
    # an export killed while its files moved in: some files, no report; it is made again
    redo = reports[1]
    redo.unlink()
    S.reproduce(_study(), out, quick=True, data_dir=str(data))
    assert len(exported) == 1 and str(redo.parent) in exported[0]
    assert redo.is_file()
    assert {r: r.stat().st_mtime_ns for r in reports if r != redo} == {
        r: t for r, t in before.items() if r != redo
    }


def test_an_export_of_a_run_trained_again_is_made_again(reproduced, monkeypatch, capsys):
    """The export records the sha256 of the weights it was made from; where the run's weights
    differ (the run was trained again into the same folder), the study exports it again
    instead of reporting the earlier weights' files."""
    data, out, _ = reproduced
    point = _study().points(True)[2]
    run = S.run_dir(out, device.STUDY, point, 0)
    report = device.export_dir(run) / device.REPORT
    weights = run / "personal_ft1.npz"
    record = json.loads((report.parent / "client1" / "int8.json").read_text())
    assert record["models_file"] == weights.name
    assert record["models_sha256"] == sha256_of(weights)
    arrays = dict(np.load(weights))
    first = sorted(arrays)[0]
    arrays[first] = arrays[first] + np.float32(1e-3)  # what another training would leave
    np.savez(weights, **arrays)
    monkeypatch.setattr(S.runner._Children, "run", lambda *a, **k: pytest.fail("retrained"))
    monkeypatch.setenv(device.TFLM_ENV, str(out / "no-tflm"))
    capsys.readouterr()
    S.reproduce(_study(), out, quick=True, data_dir=str(data))
    err = capsys.readouterr().err
    assert err.count("exporting again: it was made from another personal_ft1.npz") == 1
    record = json.loads((report.parent / "client1" / "int8.json").read_text())
    assert record["models_sha256"] == sha256_of(weights)


def test_an_archive_without_its_files_takes_the_times_the_pass_recorded(reproduced, tmp_path):
    """Re-rendering an archive (reports and records, no .tflite files) gives each run the
    median of its files' times in ``litert_times.json``, not its export's own timing."""
    _, out, _ = reproduced
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    for model in (copy / "exports").rglob("*.tflite"):
        model.unlink()
    runs = [S.run_dir(copy, device.STUDY, p, 0) for p in _study().points(True)]
    found = device.time_exports({run: {"litert_us": -1.0} for run in runs})
    (timed,) = json.loads((copy / "exports" / device.TIMES).read_text())["passes"]
    recorded = timed["latency_ms"]
    for run in runs:
        mine = [t for key, t in recorded.items() if key.startswith(f"{run.name}/")]
        assert len(mine) == 6
        assert found[run]["litert_us"] == pytest.approx(1000 * float(np.median(mine)))
        assert f"every file of {len(runs)} runs timed together" in found[run]["litert"]


def test_a_new_pass_keeps_the_times_of_the_archived_runs_it_cannot_time(reproduced, tmp_path):
    """One run's files gone (archived) and the others' kept: the new pass times the kept
    files, the archived run keeps its time from the earlier pass, and the record holds both
    passes, each with only its own files."""
    _, out, _ = reproduced
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    runs = [S.run_dir(copy, device.STUDY, p, 0) for p in _study().points(True)]
    archived, timed = runs[0], runs[1:]
    for model in device.export_dir(archived).rglob("*.tflite"):
        model.unlink()
    (before,) = json.loads((copy / "exports" / device.TIMES).read_text())["passes"]
    earlier = before["latency_ms"]
    found = device.time_exports({run: {} for run in runs})
    passes = json.loads((copy / "exports" / device.TIMES).read_text())["passes"]
    assert len(passes) == 2
    first, second = (set(one["latency_ms"]) for one in passes)
    assert first == {k for k in earlier if k.startswith(f"{archived.name}/")}
    assert second == {k for k in earlier if not k.startswith(f"{archived.name}/")}
    mine = [earlier[k] for k in first]
    assert found[archived]["litert_us"] == pytest.approx(1000 * float(np.median(mine)))
    assert "every file of 1 run timed together" in found[archived]["litert"]
    for run in timed:
        assert f"every file of {len(timed)} runs timed together" in found[run]["litert"]


def test_a_damaged_timing_record_is_one_error_line(reproduced, tmp_path):
    _, out, _ = reproduced
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    for model in (copy / "exports").rglob("*.tflite"):
        model.unlink()
    (copy / "exports" / device.TIMES).write_text('{"runtime": "ai-edge-litert')
    runs = [S.run_dir(copy, device.STUDY, p, 0) for p in _study().points(True)]
    with pytest.raises(DataError) as error:
        device.time_exports({run: {} for run in runs})
    assert "not a LiteRT timing record" in str(error.value) and "\n" not in str(error.value)


def test_an_export_that_names_no_weights_is_judged_by_its_age(tmp_path):
    """An archived run keeps no weights: its export stands. An export made before the
    records named their weights stands where the weights are older, and is made again
    where they are newer (the run was trained again since)."""
    out = tmp_path / "export"
    (out / "client1").mkdir(parents=True)
    (out / device.REPORT).write_text(json.dumps([{"client": 1, "path": "client1/int8.tflite"}]))
    (out / "client1" / "int8.json").write_text(json.dumps({"models": "personal_ft25.npz"}))
    weights = tmp_path / "run" / "personal_ft25.npz"
    assert device.other_weights(out, weights) is None  # archived: no weights kept
    weights.parent.mkdir()
    np.savez(weights, w=np.zeros(3))
    record = out / "client1" / "int8.json"
    os.utime(weights, (1_000_000, 1_000_000))
    assert device.other_weights(out, weights) is None  # trained before the export
    os.utime(record, (999_000, 999_000))
    assert device.other_weights(out, weights) == (
        "personal_ft25.npz is newer than the export (the run was trained again)"
    )


def test_the_cortex_m_columns_name_what_this_machine_lacks(tmp_path, monkeypatch):
    """Without a TFLite Micro tree, or without the cross tools on PATH, the reason is one
    line naming it (no Cortex-M number is made up)."""
    monkeypatch.setenv(device.TFLM_ENV, str(tmp_path / "none"))
    expected = f"no TFLite Micro tree at {tmp_path / 'none'} (set {device.TFLM_ENV})"
    assert device.cortex_m_trees() == expected
    tree = tmp_path / "tree" / "tensorflow" / "lite" / "micro"
    tree.mkdir(parents=True)
    (tree / "micro_interpreter.h").write_text("")
    cmsis = tmp_path / "cmsis" / "cmsis_nn" / "Include"
    cmsis.mkdir(parents=True)
    (cmsis / "arm_nnfunctions.h").write_text("")
    monkeypatch.setenv(device.TFLM_ENV, str(tmp_path / "tree"))
    monkeypatch.setenv(device.CMSIS_ENV, str(tmp_path / "cmsis"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no compiler, no QEMU, no make
    reason = device.cortex_m_trees()
    assert isinstance(reason, str) and reason.endswith(" not installed")
    assert "arm-none-eabi-g++" in reason and "qemu-system-arm" in reason
