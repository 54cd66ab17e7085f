"""Writing files whole (:mod:`fedprune.runs.files`): a write that fails (an injected ENOSPC,
a real full tmpfs, an exception) leaves the old file, or nothing, and never its temporary
file; a staged folder appears whole or not at all; JSON never holds NaN either way."""

from __future__ import annotations

import errno
import json
import os
import stat

import numpy as np
import pytest

from fedprune.errors import DataError
from fedprune.runs import files
from fedprune.runs.files import (
    atomic_file,
    read_json,
    staged_folder,
    write_bytes,
    write_json,
    write_npz,
)

# a write that fails must not leave an open archive whose finalizer prints later
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")


def _full_disk_on_write(monkeypatch, after: int = 0) -> None:
    """Every write into a temporary file, after ``after`` bytes, fails as a full disk does."""
    real = files.atomic_file

    class Filling:
        def __init__(self, handle):
            self.handle, self.written = handle, 0

        def write(self, data):
            if self.written + len(data) > after:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.written += len(data)
            return self.handle.write(data)

        def __getattr__(self, name):
            return getattr(self.handle, name)

    import contextlib

    @contextlib.contextmanager
    def filling(path, text=False):
        with real(path, text) as handle:
            yield Filling(handle)

    monkeypatch.setattr(files, "atomic_file", filling)


def test_a_write_failing_midway_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "float32.tflite"
    write_bytes(path, b"old model")
    _full_disk_on_write(monkeypatch, after=3)
    with pytest.raises(OSError) as caught:
        files.write_bytes(path, b"a new model, longer")
    assert caught.value.errno == errno.ENOSPC
    assert path.read_bytes() == b"old model"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["float32.tflite"]


def test_an_npz_on_a_full_disk_leaves_neither_file_nor_temporary(small_disk):
    disk = small_disk(64)
    path = disk / "dataset.npz"
    with pytest.raises(OSError) as caught:
        write_npz(path, {"x": np.zeros((64, 1024), np.float32)})  # 256 KiB > 64 KiB
    assert caught.value.errno == errno.ENOSPC
    assert list(disk.iterdir()) == []  # no dataset.npz, no dataset.npz.tmp.npz


def test_the_old_file_survives_a_real_full_disk(small_disk):
    disk = small_disk(64)
    path = disk / "checkpoint.npz"
    write_npz(path, {"w": np.arange(10.0)})
    with pytest.raises(OSError):
        write_npz(path, {"w": np.zeros((64, 1024), np.float32)})
    from fedprune.runs.npz import read_arrays

    np.testing.assert_array_equal(read_arrays(path)["w"], np.arange(10.0))
    assert [p.name for p in disk.iterdir()] == ["checkpoint.npz"]


def test_an_exception_inside_the_block_leaves_nothing(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with atomic_file(tmp_path / "metrics.csv", text=True) as f:
            f.write("round,acc\n")
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["opening a member", "writing a member", "closing a member"])
def test_an_npz_write_interrupted_inside_zipfile_leaves_nothing_to_finish_at_exit(
    tmp_path, monkeypatch, where
):
    """Ctrl-C landing inside ``zipfile`` (a run interrupted while writing its checkpoint): no
    file, no temporary, and no archive left holding the closed temporary file, whose
    finalizer would print "Exception ignored ... seek of closed file" when the process ends."""
    import gc
    import sys
    import zipfile

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    target = {
        "opening a member": (zipfile._ZipWriteFile, "__init__"),
        "writing a member": (np.lib.format, "write_array"),
        "closing a member": (zipfile._ZipWriteFile, "close"),
    }[where]
    original = getattr(*target)
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    monkeypatch.setattr(*target, interrupt)
    with pytest.raises(KeyboardInterrupt) as caught:
        write_npz(tmp_path / "checkpoint.npz", {"w": np.arange(10.0)})
    monkeypatch.setattr(*target, original)  # a member's own finalizer closes it as usual
    del caught
    gc.collect()
    assert unraisable == []
    assert list(tmp_path.iterdir()) == []


def test_written_files_get_the_umask_mode_and_a_planted_link_is_not_followed(tmp_path):
    old = os.umask(0o027)
    try:
        write_bytes(tmp_path / "a.bin", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.bin").stat().st_mode) == 0o640
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "b.bin").symlink_to(victim)  # the target name itself a link: replaced
    write_bytes(tmp_path / "b.bin", b"new")
    assert victim.read_text() == "keep" and not (tmp_path / "b.bin").is_symlink()


def test_npz_temporary_name_ends_in_npz_so_numpy_appends_nothing(tmp_path, monkeypatch):
    seen = []
    real_replace = os.replace

    def spy(src, dst):
        seen.append(os.fspath(src))
        real_replace(src, dst)

    monkeypatch.setattr(files.os, "replace", spy)
    write_npz(tmp_path / "masks.npz", {"m": np.ones(3)})
    (name,) = seen
    assert name.endswith(".tmp.npz") and os.path.basename(name).startswith(".masks.npz.")
    assert [p.name for p in tmp_path.iterdir()] == ["masks.npz"]


@pytest.mark.parametrize(
    ("value", "place"),
    [
        ({"avg_acc": float("nan")}, "'avg_acc' (nan)"),
        ({"clients": [0.5, float("inf")]}, "'clients'[1] (inf)"),
        ({"a": {"b": -float("inf")}}, "'a'.'b' (-inf)"),
        ([1.0, float("nan")], "[1] (nan)"),
    ],
)
def test_json_with_a_non_finite_number_is_not_written(tmp_path, value, place):
    path = tmp_path / "summary.json"
    with pytest.raises(DataError) as caught:
        write_json(path, value)
    assert str(caught.value) == (
        f"refusing to write {path}: {place} is not a finite number, which JSON cannot hold"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_json_holding_nan_or_infinity_is_damaged(tmp_path, constant):
    path = tmp_path / "summary.json"
    path.write_text(f'{{"avg_acc": {constant}}}\n')
    with pytest.raises(DataError) as caught:
        read_json(path)
    message = str(caught.value)
    assert message.startswith(f"{path} is damaged (holds {constant}, which is not JSON")
    assert "\n" not in message


def test_json_round_trips_finite_values(tmp_path):
    value = {"b": [1, 2.5, None, "x"], "a": {"c": True}}
    write_json(tmp_path / "v.json", value)
    assert read_json(tmp_path / "v.json") == value
    assert json.loads((tmp_path / "v.json").read_text()) == value


def _tree(folder):
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _put(folder, contents: dict[str, bytes]) -> None:
    """Write ``{relative path: bytes}`` under ``folder``."""
    for name, content in contents.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        write_bytes(folder / name, content)


def test_a_staged_folder_appears_whole(tmp_path):
    out = tmp_path / "export"
    with staged_folder(out, last=("report.json",)) as stage:
        _put(stage, {"client1/model.tflite": b"model", "report.json": b"{}"})
        assert list(out.iterdir()) == [stage]  # nothing visible before the end
    assert _tree(out) == {"client1/model.tflite": b"model", "report.json": b"{}"}
    assert sorted(p.name for p in out.iterdir()) == ["client1", "report.json"]


def test_a_failed_staged_folder_leaves_the_old_one_intact(tmp_path):
    out = tmp_path / "export"
    _put(out, {"report.json": b"old report", "client1/model.tflite": b"old model"})
    before = _tree(out)
    with pytest.raises(OSError):
        with staged_folder(out, replace=["report.json", "client1"]) as stage:
            _put(stage, {"client1/model.tflite": b"new mo"})
            raise OSError(errno.ENOSPC, "No space left on device")
    assert _tree(out) == before
    assert sorted(p.name for p in out.iterdir()) == ["client1", "report.json"]


def test_a_staged_folder_replaces_the_named_entries_only_when_complete(tmp_path):
    out = tmp_path / "export"
    old = {"report.json": b"old report", "client2/model.tflite": b"old client 2"}
    _put(out, {**old, ".fedprune.lock": b"1\n"})
    with staged_folder(out, replace=["report.json", "client2"]) as stage:
        _put(stage, {"client1/model.tflite": b"new client 1", "report.json": b"new report"})
        assert (out / "client2" / "model.tflite").read_bytes() == b"old client 2"
    assert _tree(out) == {
        ".fedprune.lock": b"1\n",
        "client1/model.tflite": b"new client 1",
        "report.json": b"new report",
    }  # the old client2 is gone with the old report: no mix of two exports


def test_leftovers_of_a_killed_staging_are_removed(tmp_path):
    out = tmp_path / "export"
    (out / ".staged-0badc0de" / "client1").mkdir(parents=True)
    (out / ".replaced-0badc0de").mkdir()
    with staged_folder(out) as stage:
        write_bytes(stage / "report.json", b"{}")
    assert sorted(p.name for p in out.iterdir()) == ["report.json"]
