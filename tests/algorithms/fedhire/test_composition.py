"""The family as a composition: each configuration builds its clusterer, one runner runs any
clusterer, the client / server steps come from their tables, and a run takes a table that is
already split (with or without classes)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fedprune.algorithms.fedhire import algorithm
from fedprune.algorithms.fedhire.clusterers import Clustering, FedHire, FedKMeans, KFed
from fedprune.algorithms.fedhire.experiment import run_clustering, run_fedhire
from fedprune.configs import fedhire as configs
from fedprune.configs.fedhire import FedHireConfig, FedKMeansConfig, KFedConfig
from fedprune.data import table_partition as partition
from fedprune.data.table_partition import FederatedSplit
from fedprune.data.uci_tabular import read_tabular
from fedprune.errors import ConfigError, DataError
from tests.algorithms.fedhire.test_run import _blobs_ecoli

pytestmark = pytest.mark.slow

SMALL = dict(dataset="ecoli", partition="paper", num_clients=3, k_star=3)


def test_the_configs_options_are_the_step_tables():
    assert configs.CLIENT_METHODS == tuple(algorithm.CLIENT_STEPS)
    assert configs.SERVER_METHODS == tuple(algorithm.SERVER_ATTEMPTS)


def test_each_config_builds_its_own_clusterer():
    config = FedHireConfig(dataset="ecoli", eta=0.1, k0_ratio=0.3, client_method="kmeans")
    assert config.clusterer() == FedHire(
        algorithm.FedHireParams(eta=0.1, k0_ratio=0.3, client_method="kmeans")
    )
    # the k-means baselines record Fed-HIRE's fields but neither check nor use them
    assert KFedConfig(dataset="ecoli", eta=-1.0).clusterer() == KFed()
    assert FedKMeansConfig(dataset="ecoli", rounds=7, k0_ratio=2.0).clusterer() == FedKMeans(7)
    with pytest.raises(ConfigError, match="--eta"):
        FedHireConfig(dataset="ecoli", eta=-1.0)
    # the configuration.json keys are the family's, whichever the method
    keys = set(FedHireConfig(dataset="ecoli").recorded())
    assert set(KFedConfig(dataset="ecoli").recorded()) == keys
    assert set(FedKMeansConfig(dataset="ecoli").recorded()) == keys | {"rounds"}


def test_steps_by_table_equal_the_named_functions():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(c, 0.3, (10, 2)) for c in (0.0, 4.0)])
    for name, step in algorithm.CLIENT_STEPS.items():
        params = algorithm.FedHireParams(client_method=name)
        a = algorithm.client_step(x, np.random.default_rng(1), params, 2)
        b = step(x, np.random.default_rng(1), params, 2)
        np.testing.assert_array_equal(a.labels, b.labels)
    with pytest.raises(ConfigError, match="--client-method"):
        algorithm.FedHireParams(client_method="dbscan")
    with pytest.raises(ConfigError, match="--server-method"):
        algorithm.FedHireParams(server_method="dbscan")


@dataclasses.dataclass(frozen=True)
class _Halves:
    """A clusterer for the runner alone: each client's first half cluster 0, the rest 1."""

    def cluster(self, client_x, k_star, seed):
        labels = [(np.arange(x.shape[0]) >= x.shape[0] // 2).astype(np.int64) for x in client_x]
        return Clustering(labels, 10, 2, {"note": "halves"})


def test_the_runner_runs_any_clusterer(tmp_path):
    split = FederatedSplit.from_clients(
        [np.zeros((4, 2)), np.ones((6, 2))], [np.array([0, 0, 1, 1]), np.array([0, 0, 0, 1, 1, 1])]
    )
    summary = run_clustering(
        FedHireConfig(dataset="ecoli", k_star=2), _Halves(), tmp_path / "run", table=split
    )
    assert summary["acc"] == 1.0 and summary["clusters_found"] == 2
    from fedprune.runs.events import read_scalars

    assert read_scalars(tmp_path / "run")["acc"] == [(1, 1.0)]  # TensorBoard: the scores
    assert summary["note"] == "halves" and summary["bytes_uploaded"] == 10
    assert list(summary)[-5:] == ["note", "bytes_uploaded", "bytes_downloaded", "cpu_s", "wall_s"]
    assert summary["objects"] == 10 and summary["clients"] == 2


@pytest.mark.parametrize("config_class", [FedHireConfig, KFedConfig])
def test_a_given_table_gives_the_loaded_runs_labels(config_class, tmp_path, tff_context):
    _blobs_ecoli(tmp_path)
    config = config_class(**SMALL)
    loaded = run_fedhire(config, tmp_path / "loaded", tmp_path, progress=False)
    table = read_tabular("ecoli", tmp_path / "uci_tabular" / "ecoli")
    split = partition.make_split("ecoli", table.x, table.y, "paper", 3, 0)
    given = run_fedhire(config, tmp_path / "given", data_dir=tmp_path / "nowhere", table=split)
    timings = ("cpu_s", "wall_s")
    assert {k: v for k, v in given.items() if k not in timings} == {
        k: v for k, v in loaded.items() if k not in timings
    }
    a, b = np.load(tmp_path / "loaded" / "labels.npz"), np.load(tmp_path / "given" / "labels.npz")
    assert sorted(a.files) == sorted(b.files)
    for key in a.files:
        np.testing.assert_array_equal(a[key], b[key])
    assert (tmp_path / "given" / "metrics.csv").read_text() == (
        tmp_path / "loaded" / "metrics.csv"
    ).read_text()

    # the same objects without classes: same labels, no scores, no metrics.csv
    bare = FederatedSplit.from_clients(split.client_x())
    unscored = run_fedhire(config, tmp_path / "bare", table=bare)
    assert not {"purity", "ari", "nmi", "acc"} & set(unscored)
    assert unscored["objects"] == loaded["objects"]
    assert unscored["clusters_found"] == loaded["clusters_found"]
    assert not (tmp_path / "bare" / "metrics.csv").exists()
    c = np.load(tmp_path / "bare" / "labels.npz")
    for i in range(3):
        np.testing.assert_array_equal(c[f"client{i}"], a[f"client{i}"])
        assert c[f"rows{i}"].size == a[f"rows{i}"].size


def test_a_table_without_classes_needs_k_star(tmp_path):
    bare = FederatedSplit.from_clients([np.eye(3), np.eye(3) + 1])
    with pytest.raises(ConfigError, match="--k-star is needed"):
        run_fedhire(KFedConfig(dataset="ecoli"), tmp_path / "run", table=bare)
    assert not (tmp_path / "run").exists()
    summary = run_fedhire(KFedConfig(dataset="ecoli", k_star=2), tmp_path / "run", table=bare)
    assert summary["clusters_found"] == 2 and "ari" not in summary


BAD_TABLES = [
    (lambda: FederatedSplit.from_clients([]), "at least one client"),
    (lambda: FederatedSplit.from_clients([np.ones((3, 2)), np.ones((3, 4))]), "client 1"),
    (lambda: FederatedSplit.from_clients([np.ones(3)]), "2-D"),
    (lambda: FederatedSplit.from_clients([np.ones((3, 2))], [np.ones(2)]), "3 objects"),
    (lambda: FederatedSplit.from_clients([np.ones((3, 2))], []), "0 class vectors"),
    (lambda: FederatedSplit([np.array([0, 3])], np.ones((3, 2))), "row 3"),
    (lambda: FederatedSplit([np.array([0.5])], np.ones((3, 2))), "row indices"),
    (lambda: FederatedSplit([np.array([0, 1])], np.ones((3, 2)), np.ones(2)), "one per row"),
]


@pytest.mark.parametrize("call, text", BAD_TABLES)
def test_bad_tables(call, text):
    with pytest.raises(DataError, match=text) as info:
        call()
    assert "\n" not in str(info.value)
