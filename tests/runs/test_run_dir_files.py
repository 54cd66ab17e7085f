"""A run directory's own files: made private (0700, it holds a copy of the user's data), and
a disk that fills before round 1 leaves nothing behind (no ``dataset.npz``, nor its
temporary ``dataset.npz.tmp.npz``, nor the folder)."""

from __future__ import annotations

import errno
import os
import stat

import numpy as np
import pytest

import fedprune as fp
from fedprune.runs import RunDir, owned_run_dir


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_run_directory_fedprune_makes_is_private(tmp_path):
    old = os.umask(0o022)
    try:
        with owned_run_dir(tmp_path / "runs" / "a"):
            pass
        with owned_run_dir(tmp_path / "runs" / "b") as run:
            RunDir(run, {"method": "fedavg"})
        RunDir(tmp_path / "runs" / "c", {"method": "fedavg"})  # the writer alone, no lock
    finally:
        os.umask(old)
    assert not (tmp_path / "runs" / "a").exists()  # nothing written: removed again
    assert _mode(tmp_path / "runs" / "b") == 0o700
    assert _mode(tmp_path / "runs" / "c") == 0o700
    assert _mode(tmp_path / "runs") == 0o755  # a folder above it: the usual mode


def test_a_folder_you_made_keeps_its_mode(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o750)
    with owned_run_dir(mine) as run:
        RunDir(run, {"method": "fedavg"})
    assert _mode(mine) == 0o750


def _windows() -> object:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(240, 32, 3)).astype(np.float32)  # 92 KiB of windows
    return fp.from_arrays(x, np.tile([0, 1], 120), np.repeat([1, 2, 3], 80))


def test_a_disk_full_before_round_1_leaves_nothing(small_disk):
    disk = small_disk(32)
    trainer = fp.fedavg(_windows(), rounds=1)
    with pytest.raises(OSError) as caught:
        trainer.run(disk / "run", progress=False, workers=None)
    assert caught.value.errno == errno.ENOSPC
    assert list(disk.iterdir()) == []  # no run folder, no dataset.npz.tmp.npz


def test_a_write_error_before_round_1_leaves_nothing(tmp_path, monkeypatch):
    """The same without root: the kernel's error injected where the npz is written."""
    from fedprune.runs import files

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.np.lib.format, "write_array", full)
    with pytest.raises(OSError):
        fp.fedavg(_windows(), rounds=1).run(tmp_path / "run", progress=False, workers=None)
    assert list(tmp_path.iterdir()) == []
