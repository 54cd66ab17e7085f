"""The pipeline's server state and its checkpoint form (fast, no TensorFlow)."""

import numpy as np

from fedprune.algorithms.caafp.communication import CommAccounts
from fedprune.algorithms.pipeline.state import PipelineState


def _accounts(saved=None):
    return CommAccounts(10, 8, 8, saved)


def test_before_clustering_only_the_global_model_and_the_accounts_are_saved():
    state = PipelineState([np.ones(3), np.zeros(2)], _accounts())
    state.accounts.model(8, 4)
    arrays, scalars = state.to_checkpoint()
    assert list(arrays) == ["global"]
    assert scalars["eq13_models"] == 4 * 10 * 4.0  # 4 transfers of 10 dense float32 values
    back = PipelineState.from_checkpoint(arrays, scalars, clusters=2, accounts=_accounts)
    assert back.assignment is None and back.cluster_w == {}
    assert back.accounts.total_bytes("eq13") == 160.0


def test_clusters_round_trip_under_the_keys_older_runs_wrote():
    w = [np.arange(4.0).reshape(2, 2), np.ones(2)]
    state = PipelineState(w, _accounts(), assignment=np.array([1, 0, 1]))
    for c in (0, 1):
        state.cluster_w[c] = [v + c for v in w]
        state.cluster_m[c] = [np.full_like(v, c, np.float32) for v in w]
    arrays, scalars = state.to_checkpoint()
    # the layout of checkpoints written before the state had a class: they still resume
    assert sorted(arrays) == ["assignment", "cluster0_m", "cluster0_w", "cluster1_m"] + [
        "cluster1_w",
        "global",
    ]
    back = PipelineState.from_checkpoint(arrays, scalars, clusters=2, accounts=_accounts)
    assert back.assignment.tolist() == [1, 0, 1]
    assert np.array_equal(back.cluster_w[1][0], w[0] + 1)
    assert back.cluster_m[0][1].tolist() == [0.0, 0.0]
    assert back.cluster_of([7, 8, 9]) == {7: 1, 8: 0, 9: 1}


def test_a_chosen_k_round_trips_without_being_told_k():
    from fedprune.algorithms.caafp.choose_k import ClusterChoice
    from fedprune.algorithms.pipeline.state import saved_clusters

    w = [np.ones(2)]
    state = PipelineState(w, _accounts(), assignment=np.array([0, 1, 2, 0]))
    for c in range(3):
        state.cluster_w[c] = [v * c for v in w]
        state.cluster_m[c] = [np.ones(2, np.float32)]
    state.choice = ClusterChoice({2: 0.25, 3: 0.5}, 0.1, 3)
    assert state.clusters == 3
    arrays, scalars = state.to_checkpoint()
    tried, silhouettes, settings = arrays["cluster_choice"]
    assert tried.tolist() == [2, 3] and silhouettes.tolist() == [0.25, 0.5]
    assert settings.tolist() == [0.1, 3.0]
    assert saved_clusters(arrays) == 3
    back = PipelineState.from_checkpoint(arrays, scalars, clusters=None, accounts=_accounts)
    assert back.clusters == 3 and back.choice == state.choice
    assert back.cluster_w[2][0].tolist() == [2.0, 2.0]


def test_a_fixed_k_writes_no_choice():
    state = PipelineState([np.ones(2)], _accounts(), assignment=np.array([0, 0]))
    state.cluster_w[0], state.cluster_m[0] = [np.ones(2)], [np.ones(2)]
    arrays, _ = state.to_checkpoint()
    assert "cluster_choice" not in arrays
