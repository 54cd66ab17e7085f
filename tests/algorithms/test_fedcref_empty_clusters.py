"""Clusters that Algorithm 2 leaves empty: dropped from the exchange (fast, hand-computed),
and runs in which a stabilized client empties one finish (slow)."""

from __future__ import annotations

import numpy as np
import pytest

from fedprune.algorithms.fedcref import algorithm
from fedprune.algorithms.fedcref.algorithm import drop_empty_clusters
from fedprune.algorithms.fedcref.association import association_edges
from fedprune.algorithms.fedcref.refinement import align_labels, refine
from fedprune.algorithms.fedcref.stopping import is_stable


def _model(tag: float) -> list[np.ndarray]:
    return [np.full((2, 2), tag, np.float32)]


def test_drop_empty_clusters_removes_only_the_models_of_empty_clusters():
    models = {(0, 0): _model(0), (0, 1): _model(1), (0, 2): _model(2)}
    models |= {(1, 0): _model(3), (1, 1): _model(4)}
    # client 0 uses clusters 0 and 2, client 1 only cluster 1
    assignments = [np.array([0, 0, 2, 2]), np.array([1, 1, 1])]
    assert drop_empty_clusters(models, assignments) == [(0, 1), (1, 0)]
    assert sorted(models) == [(0, 0), (0, 2), (1, 1)]
    assert models[(0, 2)][0][0, 0] == 2  # the others are untouched
    assert drop_empty_clusters(models, assignments) == []  # nothing left to drop


def test_a_client_stabilized_with_emptied_clusters_drops_out_of_the_exchange():
    """Why a cluster empties: one received model explains every sample better than the
    client's own three (Alg. 2: it wins every vote at p = 1, R is then empty, H_2 and H_3
    stay empty), and ACC(previous, new) = 8 / 10 = tau, so the client is stable and keeps
    its last models (Phase 5) without retraining."""
    previous = np.array([0] * 8 + [1, 2])
    errors = np.vstack([np.ones((3, 10)), np.zeros((1, 10))])  # 3 own models, 1 community
    new = align_labels(previous, refine(errors, 3), 3)
    np.testing.assert_array_equal(new, np.zeros(10, dtype=np.int64))
    assert is_stable(previous, new, tau=0.8)

    models = {(0, q): _model(q) for q in range(3)} | {(1, 0): _model(9)}
    other = np.zeros(6, dtype=np.int64)  # client 1: one cluster of 6 samples
    assert drop_empty_clusters(models, [new, other]) == [(0, 1), (0, 2)]
    # the exchange then scores only clusters with samples (errors of 2 models on 16 samples)
    members = [np.arange(10), 10 + np.arange(6)]
    edges = association_edges(np.zeros((2, 16)), members, [0, 1], alpha=75, theta=0.2)
    assert edges == [(0, 1)]


def test_an_empty_error_vector_is_a_programming_error():
    from fedprune.algorithms.fedcref.association import one_way_score

    with pytest.raises(ValueError, match="at least one sample"):
        one_way_score(np.array([]), np.array([]), 75)


# --- end to end (slow) ----------------------------------------------------------------------

# On the pattern fixture (tests/algorithms/test_fedcref_run.py), this system's client 1
# empties cluster 1 in iteration 2's refinement and becomes stable: iteration 3 exchanges
# without it (it failed with "cannot score an empty cluster" before empty clusters were
# dropped).
FIXTURE_SYSTEM = dict(dataset="mnist", num_clients=4, samples_per_class=10, seed=1)
FIXTURE_PARAMS = dict(local_epochs=3, fl_rounds=1, max_iterations=3, batch_size=8)


@pytest.mark.slow
def test_a_fixture_run_with_an_emptied_cluster_finishes(tmp_path, tff_context, monkeypatch):
    from fedprune.algorithms.fedcref.experiment import run_fedcref_experiment
    from fedprune.configs.fedcref import FedCRefRunConfig
    from fedprune.data import images
    from tests.algorithms.test_fedcref_run import pattern_images
    from tests.data.test_images import write_idx_pair

    write_idx_pair(tmp_path / "mnist", images.file_names("mnist", "train"), *pattern_images())
    dropped = []

    def recording(models, assignments):
        keys = drop_empty_clusters(models, assignments)
        dropped.extend(keys)
        return keys

    monkeypatch.setattr(algorithm, "drop_empty_clusters", recording)
    config = FedCRefRunConfig(**FIXTURE_SYSTEM, **FIXTURE_PARAMS)
    summary = run_fedcref_experiment(config, tmp_path / "run", tmp_path, progress=False)
    assert dropped == [(1, 1)]  # the run took the path this test is about
    assert summary["iterations"] == 3
    assert not (tmp_path / "run" / "checkpoint.npz").exists()


@pytest.mark.slow
@pytest.mark.real_data
def test_the_real_mnist_system_whose_clients_empty_clusters_finishes(
    tmp_path, real_data, tff_context, monkeypatch
):
    """``fedprune train fedcref --dataset mnist --clients 4 --samples-per-class 30 --epochs 3
    --max-iterations 3 --seed 0``: in iteration 2, clients 1-3 put all their samples in one
    cluster (one model wins every vote) and become stable; iteration 3 exchanges without
    their emptied clusters, and client 0 becomes stable too."""
    from fedprune.algorithms.fedcref.experiment import run_fedcref_experiment
    from fedprune.configs.fedcref import FedCRefRunConfig

    dropped = []

    def recording(models, assignments):
        keys = drop_empty_clusters(models, assignments)
        dropped.extend(keys)
        return keys

    monkeypatch.setattr(algorithm, "drop_empty_clusters", recording)
    config = FedCRefRunConfig(
        dataset="mnist", num_clients=4, samples_per_class=30, local_epochs=3, max_iterations=3
    )
    summary = run_fedcref_experiment(config, tmp_path / "run", real_data, progress=False)
    assert {client for client, _ in dropped} == {1, 2, 3}
    assert (summary["iterations"], summary["stop_reason"]) == (3, "no active clients")
