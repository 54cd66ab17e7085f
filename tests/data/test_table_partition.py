"""--partition paper / authors."""

import json
from pathlib import Path

import numpy as np

from fedprune.data import table_partition as partition


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 3))
    y = np.repeat([0, 1, 2], 40)
    return x, y


def test_paper_partition_every_object_once_and_seeded():
    x, y = _data()
    a = partition.paper_partition(x, y, num_clients=8, seed=3)
    b = partition.paper_partition(x, y, num_clients=8, seed=3)
    c = partition.paper_partition(x, y, num_clients=8, seed=4)
    assert len(a) == 8
    assert all(r.size >= 2 for r in a)
    assert np.array_equal(np.sort(np.concatenate(a)), np.arange(120))
    assert all(np.array_equal(p, q) for p, q in zip(a, b))
    assert not all(np.array_equal(p, q) for p, q in zip(a, c))


def test_paper_partition_fragments_classes():
    x, y = _data()
    rows = partition.paper_partition(x, y, num_clients=8, seed=0, clusterlets_per_class=4)
    # each class reaches at most 4 clients
    for cls in range(3):
        assert sum(np.any(y[r] == cls) for r in rows) <= 4


def test_zscore_population():
    z = partition.zscore_population(np.array([[1.0, 5.0], [3.0, 5.0]]))
    assert np.allclose(z, [[-1.0, 0.0], [1.0, 0.0]])


def test_author_splits_file_is_the_shared_copy():
    ours = partition.AUTHOR_SPLITS
    assert ours == Path(__file__).resolve().parents[2] / "fedprune/data/fedhire_author_splits.json"
    table = json.loads(ours.read_text())
    assert set(table) == set(partition.CODES.values())
    rows = partition.author_rows("ecoli")
    assert [r.size for r in rows] == [34, 43, 39, 31, 73, 114, 60, 39]


def test_make_split_authors_zscores_and_drops_vehicle_row():
    x = np.arange(846 * 2, dtype=np.float64).reshape(846, 2)
    split = partition.make_split("statlog_vehicle", x, np.zeros(846, dtype=int), "authors")
    assert split.x.shape == (845, 2)
    assert np.allclose(split.x.mean(axis=0), 0) and np.allclose(split.x.std(axis=0), 1)
    assert len(split.rows) == 8
