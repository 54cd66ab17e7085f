"""Data given as arrays are stored once, by content (:mod:`fedprune.data.user_store`): every
run of the same arrays holds a hard link to one read-only file, ``dataset.json`` says which,
the bytes (and so the configuration's ``dataset_sha256``) are the same for every run, a
damaged store entry is rewritten rather than linked, and where linking is impossible the run
holds its own copy as before. Nothing here trains (the runs on such data are in
test_user_model.py, test_moved_and_concurrent_runs.py and test_script_from_docs.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import fedprune as fp
from fedprune.api.trainer import _placed_data
from fedprune.data import user_store
from fedprune.data.user import file_sha256, read_npz
from fedprune.errors import DataError


def _windows(label_shift: int = 0) -> fp.WindowedDataset:
    rng = np.random.default_rng(0)
    y = (np.arange(40) % 2 + label_shift) % 2
    return fp.from_arrays(rng.normal(size=(40, 8, 3)), y, np.repeat([3, 5], 20))


def _place(data: object, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    with _placed_data(data, out) as path:
        return path


def test_two_runs_of_the_same_arrays_share_one_stored_file(tmp_path):
    data = _windows()
    first, second = _place(data, tmp_path / "a"), _place(data, tmp_path / "b")
    assert os.stat(first).st_ino == os.stat(second).st_ino  # one file on disk
    record = json.loads((tmp_path / "a" / "dataset.json").read_text())
    assert record["linked"] is True and record["file"] == "dataset.npz"
    assert record["content_sha256"] == user_store.content_sha256(data)
    stored = Path(record["store"])
    assert stored.parent == user_store.store_dir() and stored.stem == record["content_sha256"]
    assert os.stat(stored).st_ino == os.stat(first).st_ino
    assert not os.stat(stored).st_mode & 0o222  # read-only: never changed in place
    assert file_sha256(first) == file_sha256(second)  # the same dataset_sha256 for both runs
    back = read_npz(first)
    assert np.array_equal(back.x, data.x) and np.array_equal(back.y, data.y)
    stored.unlink()  # deleting the store leaves every run its data
    assert np.array_equal(read_npz(second).subject, data.subject)


def test_the_content_hash_follows_the_values_not_the_layout():
    data = _windows()
    same = fp.from_arrays(np.asfortranarray(data.x), data.y, data.subject)
    assert user_store.content_sha256(same) == user_store.content_sha256(data)
    assert user_store.content_sha256(_windows(1)) != user_store.content_sha256(data)
    named = fp.from_arrays(data.x, data.y, data.subject, class_names=("a", "b"))
    assert user_store.content_sha256(named) != user_store.content_sha256(data)
    table = fp.from_table(np.ones((4, 2)), [0, 0, 1, 1])
    assert user_store.content_sha256(table) != user_store.content_sha256(data)


def test_a_damaged_store_entry_is_rewritten_not_linked(tmp_path):
    data = _windows()
    record = json.loads(_place(data, tmp_path / "a").with_name("dataset.json").read_text())
    stored = Path(record["store"])
    (tmp_path / "a" / "dataset.npz").unlink()
    stored.chmod(0o644)
    stored.write_bytes(b"not an archive")
    path = _place(data, tmp_path / "b")
    assert np.array_equal(read_npz(path).x, data.x)
    assert os.stat(path).st_ino == os.stat(stored).st_ino  # the rewritten entry


def test_where_no_link_can_be_made_the_run_holds_its_own_copy(tmp_path, monkeypatch):
    def refuse(*args: object) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", refuse)
    data = _windows()
    path = _place(data, tmp_path / "a")
    record = json.loads(path.with_name("dataset.json").read_text())
    assert record["linked"] is False and record["store"] is not None
    assert os.stat(path).st_nlink == 1 and np.array_equal(read_npz(path).x, data.x)
    assert not list(path.parent.glob(".*.link"))


def test_a_store_folder_of_another_user_is_not_used(tmp_path, monkeypatch):
    user_store.store_dir().mkdir(parents=True)
    monkeypatch.setattr(user_store, "untrusted", lambda path, folder=False: "not yours")
    path = _place(_windows(), tmp_path / "a")
    record = json.loads(path.with_name("dataset.json").read_text())
    assert record == {**record, "linked": False, "store": None}
    assert os.stat(path).st_nlink == 1


def test_a_start_that_fails_removes_the_run_files_and_keeps_the_store(tmp_path):
    data, out = _windows(), tmp_path / "a"
    out.mkdir()
    with pytest.raises(DataError), _placed_data(data, out):
        raise DataError("refused")
    assert not (out / "dataset.npz").exists() and not (out / "dataset.json").exists()
    assert (user_store.store_dir() / f"{user_store.content_sha256(data)}.npz").exists()
