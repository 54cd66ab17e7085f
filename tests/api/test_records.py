"""A run of your own data records only what applies to it: no partition, number of clients,
Dirichlet alpha or proxy size in ``config.json`` or ``summary.json`` for data that came with
its clients and proxy set; a run recorded before those fields were left out is still the same
run. ``labels.npz`` names each client's objects by their row numbers in your table."""

from __future__ import annotations

import json

import numpy as np
import pytest

import fedprune as fp
from fedprune.configs.ascfl import PARTITION_OPTIONS
from fedprune.errors import ConfigError

pytestmark = pytest.mark.slow

IDS = np.array([9, 2, 9, 5, 2, 5, 9, 2, 5, 9, 2, 5, 5, 9, 2, 2, 9, 5])  # interleaved


def _table() -> fp.ClientTable:
    rng = np.random.default_rng(1)
    truth = np.arange(len(IDS)) % 3
    return fp.from_table(truth[:, None] * 5.0 + rng.normal(size=(len(IDS), 2)), IDS, truth)


def test_your_table_records_no_partition_and_keeps_your_row_numbers(tmp_path):
    table = _table()
    result = fp.kfed(table, k_star=3).run(tmp_path / "run", progress=False)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert "partition" not in config and "num_clients" not in config
    assert "partition" not in result.summary and result.summary["client_ids"] == [2, 5, 9]
    labels = np.load(tmp_path / "run" / "labels.npz")
    by_row = np.full(len(IDS), -1)
    for place, cid in enumerate((2, 5, 9)):
        rows = labels[f"rows{place}"]
        assert np.array_equal(rows, np.flatnonzero(IDS == cid))  # your rows, in your order
        by_row[rows] = labels[f"client{place}"]
        assert np.array_equal(result.assignments()[cid], labels[f"client{place}"])
    assert (by_row >= 0).all()  # every row of yours has its cluster


def test_a_run_recorded_with_the_fields_that_do_not_apply_is_the_same_run(tmp_path):
    table, out = _table(), tmp_path / "run"
    first = fp.kfed(table, k_star=3).run(out, progress=False).summary
    path = out / "config.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "partition": "authors", "num_clients": 8}))
    again = fp.kfed(table, k_star=3).run(out, progress=False)  # as an older version wrote it
    assert again.summary == first
    path.write_text(json.dumps({**record, "k_star": 4}))  # a field the run uses: another run
    with pytest.raises(ConfigError, match="different configuration"):
        fp.kfed(table, k_star=3).run(out, progress=False)


def test_your_images_record_no_partition(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.random((32, 8, 8, 1)).astype(np.float32)
    proxy = (rng.random((4, 8, 8, 1)).astype(np.float32), np.array([0, 1, 0, 1]))
    images = fp.from_images(x, np.tile([0, 1], 16), np.repeat([4, 6, 8, 10], 8), proxy=proxy)
    result = fp.ifca(images, rounds=1, clusters=2, batch_size=8).run(
        tmp_path / "run", progress=False
    )
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert not PARTITION_OPTIONS & set(config), sorted(PARTITION_OPTIONS & set(config))
    assert config["num_clients"] == 4  # yours
    assert not {"alpha", "labels"} & set(result.summary)
