"""Your own windows as a dataset (:mod:`fedprune.data.user`): every entry point gives the same
dataset, the time order is kept, and every bad input is one DataError that says what to fix."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fedprune.data import user
from fedprune.data.partition import partition_by_subject
from fedprune.errors import DataError


def _arrays(n_clients: int = 3, per_client: int = 10, seed: int = 0):
    rng = np.random.default_rng(seed)
    n = n_clients * per_client
    x = rng.normal(size=(n, 8, 3)).astype(np.float32)
    y = np.tile(np.arange(per_client) % 2, n_clients)
    ids = np.repeat(np.arange(n_clients) * 7, per_client)  # ids need not be 0..n-1
    return x, y, ids


def test_arrays_become_windows_with_default_names():
    x, y, ids = _arrays()
    data = user.from_arrays(x, y, ids)
    assert data.class_names == ("class0", "class1")
    assert data.channel_names == ("ch0", "ch1", "ch2")
    np.testing.assert_array_equal(data.x, x)
    np.testing.assert_array_equal(data.subject, ids)
    assert list(data.subjects) == [0, 7, 14]


def test_time_orders_the_windows_stably():
    x, y, ids = _arrays(1, 6)
    time = np.array([5.0, 1.0, 3.0, 1.0, 0.0, 9.0])
    data = user.from_arrays(x, y, ids, time=time)
    order = [4, 1, 3, 2, 0, 5]  # ties (1.0) keep the given order
    np.testing.assert_array_equal(data.x, x[order])
    np.testing.assert_array_equal(data.y, y[order])


def test_the_time_ordered_split_takes_each_class_first_80_percent():
    x, y, ids = _arrays(2, 20)
    fed = partition_by_subject(user.from_arrays(x, y, ids), seed=0)
    client = fed.client(7)
    rows = np.flatnonzero(ids == 7)
    first = rows[y[rows] == 0][:8]  # 10 windows of class 0: the first 8 train
    np.testing.assert_array_equal(client.x_train[client.y_train == 0], x[first])
    assert len(client.y_test) == 4 and fed.input_shape == (8, 3)


def test_mapping_and_npz_and_client_data_give_the_same_dataset(tmp_path):
    x, y, ids = _arrays()
    expected = user.from_arrays(x, y, ids, name="mine")
    mapping = {int(c): (x[ids == c], y[ids == c]) for c in np.unique(ids)}
    from_mapping = user.from_clients(mapping, name="mine")
    path = tmp_path / "mine.npz"
    np.savez(path, x=x, y=y, client_id=ids, class_names=np.array(["sit", "walk"]))
    from_file = user.read_npz(path)
    assert from_file.class_names == ("sit", "walk") and from_file.name == "mine.npz"
    for other in (from_mapping, from_file):
        np.testing.assert_array_equal(other.x, expected.x)
        np.testing.assert_array_equal(other.y, expected.y)
        np.testing.assert_array_equal(other.subject, expected.subject)


@pytest.mark.slow
def test_tff_client_data_gives_the_same_dataset():
    import tensorflow_federated as tff

    x, y, ids = _arrays()
    data = {str(c): {"x": x[ids == c], "y": y[ids == c]} for c in np.unique(ids)}
    from_tff = user.from_client_data(tff.simulation.datasets.TestClientData(data))
    expected = user.from_arrays(x, y, ids)
    np.testing.assert_array_equal(from_tff.x, expected.x)
    np.testing.assert_array_equal(from_tff.subject, expected.subject)


def _with(**changes):
    x, y, ids = _arrays()
    arrays = {"x": x, "y": y, "client_ids": ids}
    for key, change in changes.items():
        arrays[key] = change(arrays[key])
    return arrays


def _nan_at_3(x):
    x = x.copy()
    x[3, 2, 1] = np.nan
    return x


def _huge_at_4(x):
    x = x.astype(np.float64)
    x[4, 0, 0] = 1e39  # finite in float64, not in float32
    return x


BAD = {
    "nan": (_with(x=_nan_at_3), "x[3, 2, 1] = nan is not a finite float32 number"),
    "overflows float32": (_with(x=_huge_at_4), "x[4, 0, 0] = 1e+39 is not a finite"),
    "2-D x": (_with(x=lambda x: x[:, :, 0]), "reshape a single-channel series to (N, T, 1)"),
    "short y": (_with(y=lambda y: y[:-1]), "y must have one value per window (30)"),
    "short ids": (_with(client_ids=lambda c: c[:5]), "client_id must have one value per"),
    "negative label": (_with(y=lambda y: y - 1), "y[0] = -1 is not a class index in [0, 1)"),
    "text labels": (_with(y=lambda y: y.astype(str)), "y must hold numbers"),
    "fractional labels": (_with(y=lambda y: y + 0.5), "y must hold whole numbers"),
    "no windows": (_with(x=lambda x: x[:0]), "x holds no windows"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_arrays_are_one_data_error(case):
    arrays, fragment = BAD[case]
    with pytest.raises(DataError) as caught:
        user.from_arrays(arrays["x"], arrays["y"], arrays["client_ids"])
    assert fragment in str(caught.value)
    assert "\n" not in str(caught.value)


def test_labels_beyond_the_class_names_are_refused():
    x, y, ids = _arrays()
    with pytest.raises(DataError, match=r"y\[1\] = 1 is not a class index in \[0, 1\)"):
        user.from_arrays(x, y, ids, class_names=["only"])
    with pytest.raises(DataError, match="class_names is empty"):
        user.from_arrays(x, y, ids, class_names=[])


def test_a_client_too_small_for_the_split_is_refused():
    x, y, ids = _arrays()
    ids = ids.copy()
    ids[0] = 99  # client 99 has one window
    with pytest.raises(DataError, match="client 99 has 1 window.*fewer than the 2 the split"):
        user.from_arrays(x, y, ids)


def test_a_client_without_a_test_window_is_refused():
    x, y, ids = _arrays(2, 4)
    y = np.array([0, 1, 0, 1, 0, 1, 2, 3])  # client 7 has one window of each of 4 classes
    with pytest.raises(DataError, match="client 7 has no class with 2 or more windows"):
        user.from_arrays(x, y, ids)


def test_a_bad_npz_file_is_one_line(tmp_path):
    x, y, ids = _arrays()
    missing = tmp_path / "missing.npz"
    np.savez(missing, x=x, y=y)
    with pytest.raises(DataError, match="lacks client_id; its keys must be x, y, client_id"):
        user.read_npz(missing)
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip")
    with pytest.raises(DataError, match="is not a readable .npz archive"):
        user.read_npz(garbage)
    objects = tmp_path / "objects.npz"
    np.savez(objects, x=x, y=y, client_id=ids, class_names=np.array([{"a": 1}], dtype=object))
    with pytest.raises(DataError, match="not a readable .npz archive"):  # no pickle is loaded
        user.read_npz(objects)
    with pytest.raises(DataError, match="no such file"):
        user.read_npz(tmp_path / "nothing.npz")


def test_file_sha256_changes_with_the_bytes(tmp_path):
    path = tmp_path / "d.npz"
    path.write_bytes(b"abc")
    assert user.file_sha256(path) == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )  # SHA-256("abc"), FIPS 180-2's example
    path.write_bytes(b"abd")
    assert user.file_sha256(path) != (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


def test_the_protocol_settles_the_file_hash_and_refuses_other_bytes(tmp_path):
    from fedprune.configs.fedavg import FedAvgConfig
    from fedprune.configs.protocol import with_protocol

    path = tmp_path / "d.npz"
    path.write_bytes(b"abc")
    config = with_protocol(FedAvgConfig(str(path)), None)
    assert config.dataset_sha256 == user.file_sha256(path)
    assert not config.standardize and config.split == "time-ordered"
    recorded = dataclasses.asdict(config)  # the run's config.json
    assert with_protocol(FedAvgConfig(str(path)), recorded) == config
    path.write_bytes(b"abd")
    with pytest.raises(DataError, match="is not the file this run was trained on"):
        with_protocol(FedAvgConfig(str(path)), recorded)
    assert with_protocol(FedAvgConfig("uci_har"), None).dataset_sha256 is None


def test_channels_first_windows_and_labels_from_1_get_one_note_each(capsys):
    from fedprune.data.user import from_arrays

    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3, 64)).astype(np.float32)  # (N, C, T) by mistake
    y, ids = np.tile([1, 2], 20), np.repeat([1, 2], 20)
    from_arrays(x, y, ids)
    notes = capsys.readouterr().err.splitlines()
    assert len(notes) == 2 and all(n.startswith("fedprune: note:") for n in notes), notes
    assert "x.transpose(0, 2, 1)" in notes[0] and "y - 1" in notes[1]
    from_arrays(x.transpose(0, 2, 1), y - 1, ids)
    assert capsys.readouterr().err == ""
