"""The window cache: a damaged or invalid entry is dropped with one note and rebuilt."""

import numpy as np
import pytest

from fedprune.data import cache
from fedprune.data.registry import load_windows
from fedprune.data.windows import WindowedDataset
from tests.conftest import damage_zip_member


def _entry(dataset: str, data_dir, capsys):
    """Build the cache entry of ``dataset``; return its path and the freshly parsed windows."""
    fresh = load_windows(dataset, data_dir, download=False, verbose=False)
    capsys.readouterr()
    (path,) = cache.cache_dir().glob(f"{dataset}-*.npz")
    return path, fresh


def _reload_expecting_one_note(dataset, data_dir, path, capsys, reason: str):
    """Load again: exactly one note naming the entry, then the entry is valid again."""
    data = load_windows(dataset, data_dir, download=False, verbose=False)
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"fedprune: note: cache entry {path} was unreadable (")
    assert lines[0].endswith("); rebuilding it") and reason in lines[0]
    assert "warning" not in err.lower()
    assert cache.load(path, dataset) is not None  # rewritten, valid
    load_windows(dataset, data_dir, download=False, verbose=False)
    assert capsys.readouterr().err == ""  # the rebuilt entry is used silently
    return data


def _same(a: WindowedDataset, b: WindowedDataset) -> None:
    np.testing.assert_array_equal(a.x, b.x)
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_array_equal(a.subject, b.subject)
    assert (a.name, a.class_names, a.channel_names) == (b.name, b.class_names, b.channel_names)


@pytest.mark.parametrize("dataset", ["uci_har", "wisdm"])
def test_truncated_entry_is_removed_and_rebuilt(fixture_data_dir, capsys, dataset):
    path, fresh = _entry(dataset, fixture_data_dir, capsys)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    _same(_reload_expecting_one_note(dataset, fixture_data_dir, path, capsys, ""), fresh)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", ""),
        (b"garbage, not a zip", "does not start as a zip file"),
        (b"PK\x03\x04garbage", ""),
    ],
)
def test_garbage_entry_is_removed_and_rebuilt(wisdm_data_dir, capsys, content, reason):
    path, fresh = _entry("wisdm", wisdm_data_dir, capsys)
    path.write_bytes(content)
    _same(_reload_expecting_one_note("wisdm", wisdm_data_dir, path, capsys, reason), fresh)


def test_crc_damaged_entry_is_removed_and_rebuilt(fixture_data_dir, capsys):
    path, fresh = _entry("uci_har", fixture_data_dir, capsys)
    damage_zip_member(path, "x.npy")
    data = _reload_expecting_one_note("uci_har", fixture_data_dir, path, capsys, "Bad CRC-32")
    _same(data, fresh)


def _rewrite(path, **changes) -> None:
    """Rewrite the entry at ``path`` with some arrays replaced (``None`` drops one)."""
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    for key, value in changes.items():
        if value is None:
            del arrays[key]
        else:
            arrays[key] = value
    path.unlink()
    np.savez(path, **arrays)


def _x(path):
    with np.load(path) as z:
        return z["x"]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda x: {"x": x[:, :, 0]}, "not non-empty float32 (N, T, C)"),
        (lambda x: {"x": x.astype(np.float64)}, "x is float64"),
        (lambda x: {"x": x[:0]}, "not non-empty"),
        (lambda x: {"x": x[:, :, :2]}, "x has 2 channels but 3 channel names"),
        (lambda x: {"y": np.zeros(len(x) - 1, np.int64)}, "y is int64"),
        (lambda x: {"y": np.zeros(len(x), np.float32)}, "y is float32"),
        (lambda x: {"y": np.full(len(x), 6, np.int64)}, "labels outside 0-5"),
        (lambda x: {"subject": np.zeros((len(x), 1), np.int64)}, "subject is int64"),
        (lambda x: {"channel_names": np.array(["a", "b"])}, "3 channels but 2 channel names"),
        (lambda x: {"name": np.array("uci_har")}, "holds dataset 'uci_har', not 'wisdm'"),
        (lambda x: {"note": None}, "missing note"),
        (lambda x: {"x": None, "y": None}, "missing x, y"),
    ],
)
def test_invalid_arrays_are_rebuilt(wisdm_data_dir, capsys, change, reason):
    path, fresh = _entry("wisdm", wisdm_data_dir, capsys)
    _rewrite(path, **change(_x(path)))
    _same(_reload_expecting_one_note("wisdm", wisdm_data_dir, path, capsys, reason), fresh)


def test_nan_in_cached_windows_is_rebuilt(fixture_data_dir, capsys):
    path, fresh = _entry("uci_har", fixture_data_dir, capsys)
    x = _x(path).copy()
    x[3, 10, 2] = np.nan
    x[4, 0, 0] = np.inf
    _rewrite(path, x=x)
    data = _reload_expecting_one_note(
        "uci_har", fixture_data_dir, path, capsys, "x has 2 non-finite values"
    )
    assert np.isfinite(data.x).all()
    _same(data, fresh)


def test_pickled_entry_is_not_unpickled(wisdm_data_dir, capsys):
    path, fresh = _entry("wisdm", wisdm_data_dir, capsys)
    _rewrite(path, note=np.array([{"evil": 1}], dtype=object))
    data = _reload_expecting_one_note("wisdm", wisdm_data_dir, path, capsys, "never unpickles")
    _same(data, fresh)


def test_note_and_source_report_are_repeated_after_rebuild(wisdm_data_dir, capsys):
    path, _ = _entry("wisdm", wisdm_data_dir, capsys)
    path.write_bytes(b"")
    load_windows("wisdm", wisdm_data_dir, download=False)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("fedprune: note: cache entry")
    assert "6 malformed records skipped" in lines[1]


def test_save_refuses_invalid_windows(tmp_path):
    x = np.zeros((2, 4, 3), np.float32)
    x[0, 0, 0] = np.nan
    data = WindowedDataset(
        "wisdm", x, np.zeros(2, np.int64), np.ones(2, np.int64), ("a",), tuple("xyz")
    )
    with pytest.raises(ValueError, match="x has 1 non-finite values"):
        cache.save(tmp_path / "e.npz", data, "note")
    assert list(tmp_path.iterdir()) == []


def test_save_leaves_no_temporary_file(tmp_path):
    data = WindowedDataset(
        "wisdm",
        np.zeros((2, 4, 3), np.float32),
        np.zeros(2, int),
        np.ones(2, int),
        ("a",),
        tuple("xyz"),
    )
    cache.save(tmp_path / "e.npz", data, "note")
    assert [p.name for p in tmp_path.iterdir()] == ["e.npz"]
    loaded, note = cache.load(tmp_path / "e.npz", "wisdm")
    assert note == "note" and loaded.channel_names == ("x", "y", "z")


def test_absent_entry_is_silent(tmp_path, capsys):
    assert cache.load(tmp_path / "nope.npz") is None
    assert capsys.readouterr().err == ""
