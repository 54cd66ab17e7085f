"""An export is whole or absent (``edge-export``, :func:`fedprune.runs.files.staged_folder`):
a disk that fills while exporting (a real full tmpfs when root, else the kernel's error
injected where the model is written) leaves the previous export exactly as it was (or
nothing), never a truncated ``.tflite`` beside a report vouching for it; ``--overwrite``
replaces an earlier export only once the new one is complete, leaving none of its files."""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest

from edge_export.cli import main
from tests.edge_export.test_bad_input import _fedavg, _single_error_line, _tree, har_weights

pytestmark = pytest.mark.slow
__all__ = ["har_weights"]  # the fixture, used by name


@pytest.fixture
def run_and_data(tmp_path, fixture_data_dir, har_weights) -> tuple[Path, Path]:
    _fedavg(tmp_path / "run", har_weights)
    return tmp_path / "run", fixture_data_dir


def _export(run: Path, data: Path, out: Path, clients: str = "1", *extra: str) -> int:
    argv = [str(run), "--clients", clients, "--formats", "float32", "--out", str(out)]
    return main([*argv, "--data-dir", str(data), "--no-progress", *extra])


def _report_matches_files(out: Path) -> None:
    """Every file the report lists is there with the bytes it says."""
    for entry in json.loads((out / "export_report.json").read_text()):
        assert (out / entry["path"]).stat().st_size == entry["bytes"]


def test_overwrite_replaces_the_earlier_export_whole(run_and_data, tmp_path, capsys):
    run, data = run_and_data
    out = tmp_path / "export"
    assert _export(run, data, out, "1,2") == 0
    assert _export(run, data, out, "3", "--overwrite") == 0
    capsys.readouterr()
    assert sorted(p.name for p in out.iterdir()) == [
        "client3",
        "export_report.json",
        "export_report.md",
        "predictions.csv",
    ]  # no client1/ or client2/ of the earlier export beside the new report
    _report_matches_files(out)


def test_an_injected_full_disk_keeps_the_earlier_export(
    run_and_data, tmp_path, capsys, monkeypatch
):
    import edge_export.export

    run, data = run_and_data
    out = tmp_path / "export"
    assert _export(run, data, out, "1") == 0
    before = _tree(out)
    capsys.readouterr()
    real = edge_export.export.write_bytes

    def full(path, content):
        real(path, content[: len(content) // 2])  # what a full disk lets through...
        raise OSError(errno.ENOSPC, "No space left on device", str(path))  # ...and its error

    monkeypatch.setattr(edge_export.export, "write_bytes", full)
    assert _export(run, data, out, "1", "--overwrite") == 2
    line = _single_error_line(capsys.readouterr().err)
    assert f"cannot write {out / 'client1' / 'float32.tflite'} (No space left on device)" in line
    assert _tree(out) == before  # the earlier export, byte for byte, and nothing else
    _report_matches_files(out)


def test_an_injected_full_disk_on_a_new_export_leaves_nothing(
    run_and_data, tmp_path, capsys, monkeypatch
):
    import edge_export.export

    def full(path, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(edge_export.export, "write_json", full)
    run, data = run_and_data
    assert _export(run, data, tmp_path / "export", "1") == 2
    _single_error_line(capsys.readouterr().err)
    assert not (tmp_path / "export").exists()


def test_a_real_full_disk_keeps_the_earlier_export(run_and_data, small_disk, capsys):
    run, data = run_and_data
    disk = small_disk(4096)
    out = disk / "export"
    assert _export(run, data, out, "1") == 0
    before = _tree(out)
    model = (out / "client1" / "float32.tflite").stat().st_size
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    with open(disk / "filler", "wb") as filler:  # leave room for half the new model
        filler.write(b"\0" * (free - model // 2))
    capsys.readouterr()

    assert _export(run, data, out, "1", "--overwrite") == 2

    line = _single_error_line(capsys.readouterr().err)
    assert "No space left on device" in line
    assert _tree(out) == before
    assert sorted(p.name for p in disk.iterdir()) == ["export", "filler"]
    (disk / "filler").unlink()
    assert _export(run, data, out, "1", "--overwrite") == 0  # room again: it completes
    _report_matches_files(out)


def test_an_export_moved_in_keeps_the_report_paths_valid(run_and_data, tmp_path, capsys):
    """The files were written in a staging folder: the report's paths are relative to
    --out and name the files where they are now."""
    run, data = run_and_data
    out = tmp_path / "export"
    assert _export(run, data, out, "1,2") == 0
    _report_matches_files(out)
    shutil.move(out, tmp_path / "moved")
    _report_matches_files(tmp_path / "moved")
    assert ".staged-" not in (tmp_path / "moved" / "export_report.json").read_text()
