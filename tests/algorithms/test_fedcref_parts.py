"""FedCRef building blocks against hand-computed answers (association, graph, refinement,
stopping) and their error paths."""

from __future__ import annotations

import numpy as np
import pytest

from fedprune.algorithms.fedcref.association import (
    association_edges,
    normalize_unit,
    one_way_score,
)
from fedprune.algorithms.fedcref.evaluation import majority_labels, wrong_association_pct
from fedprune.algorithms.fedcref.graph import communities_of
from fedprune.algorithms.fedcref.refinement import align_labels, refine
from fedprune.algorithms.fedcref.stopping import GlobalStop, is_stable
from fedprune.configs.fedcref import FedCRefConfig
from fedprune.errors import ConfigError
from fedprune.models.autoencoder import build_autoencoder, reconstruction_errors


def test_normalize_unit_min_max_and_constant():
    np.testing.assert_allclose(normalize_unit(np.array([2.0, 4.0, 3.0])), [0.0, 1.0, 0.5])
    np.testing.assert_array_equal(normalize_unit(np.array([0.3, 0.3])), [0.0, 0.0])


def test_one_way_score_is_percentile_of_normalized_difference():
    own = np.array([0.0, 0.0, 0.0, 0.0, 0.0])
    ext = np.array([0.0, 1.0, 2.0, 3.0, 10.0])  # |d| normalized: 0, .1, .2, .3, 1
    assert one_way_score(own, ext, 75) == pytest.approx(0.3)
    assert one_way_score(own, ext, 50) == pytest.approx(0.2)
    # only the shape of the differences counts: a constant offset scores 0
    own = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    assert one_way_score(own, own + 0.5, 75) == 0.0


def test_association_requires_both_directions():
    members = [np.arange(0, 5), np.arange(5, 10), np.arange(10, 15)]
    owners = [0, 1, 2]
    errors = np.zeros((3, 15))
    similar = np.array([0.0, 0.0, 0.0, 0.1, 1.0])  # Q75 of normalized = 0.1
    distinct = np.array([0.0, 0.5, 0.8, 0.9, 1.0])  # Q75 of normalized = 0.9
    # cluster 1's model on cluster 0's samples: similar; cluster 0's on cluster 1's: similar
    errors[1, 0:5], errors[0, 5:10] = similar, similar
    # cluster 2's model reconstructs 0's samples like 0's own model, but not the reverse
    errors[2, 0:5], errors[0, 10:15] = similar, distinct
    errors[2, 5:10], errors[1, 10:15] = distinct, distinct
    edges = association_edges(errors, members, owners, alpha=75, theta=0.2)
    assert edges == [(0, 1)]


def test_clusters_of_one_client_are_never_associated():
    members = [np.arange(0, 3), np.arange(3, 6)]
    errors = np.zeros((2, 6))
    assert association_edges(errors, members, [0, 0], 75, 0.2) == []
    assert association_edges(errors, members, [0, 1], 75, 0.2) == [(0, 1)]


@pytest.mark.parametrize("alpha,theta", [(75, 1.5), (75, -0.1), (0, 0.2), (101, 0.2)])
def test_bad_thresholds(alpha, theta):
    with pytest.raises(ConfigError, match="must be in"):
        FedCRefConfig(alpha=alpha, theta=theta)


def test_communities_and_isolated():
    groups, isolated = communities_of(7, [(0, 1), (1, 2), (4, 6)])
    assert groups == [[0, 1, 2], [4, 6]]
    assert isolated == [3, 5]
    assert communities_of(3, []) == ([], [0, 1, 2])


def test_refine_follows_algorithm_2():
    # models: two own (0, 1) and one community model (2); six samples
    errors = np.array(
        [
            [0.1, 0.1, 0.5, 0.5, 0.5, 0.3],
            [0.9, 0.9, 0.9, 0.2, 0.9, 0.9],
            [0.5, 0.5, 0.1, 0.1, 0.1, 0.9],
        ]
    )
    # step 1: winners 0,0,2,1,2,0 -> model 0 and 2 tie with 3 and... model 0 wins 0,1,5;
    # model 2 wins 2,4; model 1 wins 3. Most votes: model 0 -> cluster 0 = {0,1,5}.
    # step 2 over {2,3,4} among models 1,2: 2 wins 2,3,4 -> cluster 1 = {2,3,4}.
    np.testing.assert_array_equal(refine(errors, 2), [0, 0, 1, 1, 1, 0])


def test_refine_assigns_leftovers_to_best_selected_model():
    errors = np.array([[0.1, 0.1, 0.1, 0.4], [0.9, 0.9, 0.9, 0.5], [0.8, 0.8, 0.8, 0.3]])
    # cluster 0 = model 0 (samples 0-2, and sample 3 votes model 2). Only one cluster: the
    # leftover sample 3 joins the only selected model.
    np.testing.assert_array_equal(refine(errors, 1), [0, 0, 0, 0])


def test_refine_with_fewer_models_than_clusters():
    errors = np.array([[0.1, 0.2, 0.3]])
    np.testing.assert_array_equal(refine(errors, 3), [0, 0, 0])
    with pytest.raises(ConfigError):
        refine(np.zeros((0, 3)), 2)


def test_stability_uses_hungarian_acc():
    assert is_stable(np.array([0, 0, 1, 1, 2]), np.array([2, 2, 1, 1, 0]), 0.8)
    assert not is_stable(np.array([0, 0, 1, 1, 2]), np.array([0, 1, 1, 0, 2]), 0.8)
    with pytest.raises(ConfigError, match="tau"):
        is_stable(np.array([0]), np.array([0]), 1.5)


def test_global_stop_within_ten_percent_over_three_iterations():
    stop = GlobalStop()
    assert not stop.update(12, 80)
    assert not stop.update(10, 40)
    assert not stop.update(10, 38)  # 40 -> 38 fine, but 12 -> 10 in the window
    assert stop.update(10, 37)  # last three: (10, 40), (10, 38), (10, 37)
    zero = GlobalStop()
    assert [zero.update(0, 0) for _ in range(3)] == [False, False, True]
    with pytest.raises(ConfigError):
        GlobalStop(window=1)


def test_wrong_associations_by_majority_label():
    labels = [np.array([0, 0, 1, 1, 1]), np.array([1, 1, 0])]
    clusters = [(0, 0), (0, 1), (1, 0)]
    members = [np.array([0, 1]), np.array([2, 3, 4]), np.array([0, 1, 2])]
    majority = majority_labels(clusters, members, labels)
    np.testing.assert_array_equal(majority, [0, 1, 1])
    assert wrong_association_pct([(0, 2), (1, 2)], majority) == pytest.approx(50.0)
    assert wrong_association_pct([], majority) == 0.0


def test_numpy_errors_match_keras():
    model = build_autoencoder(784, seed=3)
    assert model.count_params() == 174_840  # paper, Table 2
    x = np.random.default_rng(0).random((7, 784), dtype=np.float32)
    expected = np.mean((model.predict(x, verbose=0) - x) ** 2, axis=1)
    np.testing.assert_allclose(reconstruction_errors(model.get_weights(), x), expected, rtol=1e-4)


def test_kmeans_on_autoencoder_codes_separates_clear_classes():
    from fedprune.algorithms.fedcref.initial import kmeans_on_embeddings
    from fedprune.algorithms.fedcref.local_models import LocalTrainer
    from fedprune.data.clustered_partition import clustering_accuracy

    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 40)
    x = rng.random((80, 784)).astype(np.float32) * 0.2
    x[y == 0, :392] += 0.7
    x[y == 1, 392:] += 0.7
    assignment = kmeans_on_embeddings(x, 2, LocalTrainer(784, epochs=5, batch_size=16), seed=1)
    assert clustering_accuracy(y, assignment) >= 0.95


def test_local_trainer_is_independent_of_what_it_trained_before():
    from fedprune.algorithms.fedcref.local_models import LocalTrainer

    x = np.random.default_rng(1).random((20, 784)).astype(np.float32)
    other = np.random.default_rng(2).random((30, 784)).astype(np.float32)
    first = LocalTrainer(784, epochs=2, batch_size=8)
    a = first.fit(x, seed=5)
    second = LocalTrainer(784, epochs=2, batch_size=8)
    second.fit(other, seed=9)
    b = second.fit(x, seed=5)
    for wa, wb in zip(a, b):
        np.testing.assert_allclose(wa, wb, rtol=1e-5, atol=1e-6)


def test_align_labels_keeps_cluster_ids_across_iterations():
    previous = np.array([0, 0, 0, 1, 1, 2, 2, 2])
    new = np.array([2, 2, 1, 0, 0, 1, 1, 1])  # same clusters renumbered, one sample moved
    np.testing.assert_array_equal(align_labels(previous, new, 3), [0, 0, 2, 1, 1, 2, 2, 2])
    # a new assignment using fewer clusters keeps ids within range
    assert set(align_labels(previous, np.zeros(8, dtype=np.int64), 3)) == {0}
