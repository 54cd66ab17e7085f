"""Every bad parameter of the AS-CFL functions: one row each, a ConfigError naming it."""

import doctest

import numpy as np
import pytest

from fedprune.algorithms import ascfl
from fedprune.algorithms.ascfl import (
    cfl,
    incentive,
    metrics,
    noisy_aggregation,
    similarity,
    split_merge,
)
from fedprune.errors import ConfigError
from fedprune.privacy import accounting

U = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
S = similarity.cosine_similarity_matrix(U)
PTS = np.array([[0.0, 0.0], [0.0, 1.0], [5.0, 0.0], [5.0, 1.0]])


def half(members):
    return 0.5


BAD = [
    # similarity
    (lambda: similarity.low_rank_similarity(U, 0.0), "--explained-variance must be in"),
    (lambda: similarity.low_rank_similarity(U, 1.5), "--explained-variance must be in"),
    (lambda: similarity.rank_for_explained_variance([1.0, -1.0], 0.9), "singular values"),
    (lambda: similarity.uplink_floats(100, (20, 10), 1), "cannot exceed model_size"),
    (lambda: similarity.uplink_floats(1000, (20, 10), 11, "client_factors"), "--rank must be"),
    (lambda: similarity.uplink_floats(1000, (20, 10), 0), "--rank must be"),
    (lambda: similarity.uplink_floats(1000, (20, 10), 1, "zip"), "--uplink-reading"),
    (lambda: similarity.cosine_similarity_matrix(np.ones(3)), "2-D array"),
    (lambda: similarity.cosine_similarity_matrix(U, client_ids=["a"]), "client_ids has 1"),
    # incentive
    (lambda: incentive.admits("best", 0.5, 0.6), "--admission-rule must be one of"),
    (lambda: incentive.admits("absolute_gain", 0.5, 0.6, gain=-0.1), "--incentive-gain"),
    (lambda: incentive.admits("accuracy_floor", 0.5, 0.6, theta=1.2), "--incentive-theta"),
    (lambda: incentive.candidate_count(20, 5, fraction=0.0), "--candidate-fraction"),
    (lambda: incentive.candidate_count(20, 5, base="some"), "--candidate-base"),
    (lambda: incentive.representativeness(S, [1, 1, 1], [0], "size"), "--seed-score"),
    (lambda: incentive.representativeness(S, [1, 0, 1], [0]), "data_sizes must be finite"),
    (lambda: incentive.representativeness(S, [1, 1], [0]), "data_sizes must hold one value"),
    (lambda: incentive.grow_cluster(0, [0], half, S), "must be distinct client indices"),
    (lambda: incentive.grow_cluster(0, [1, 1], half, S), "must be distinct client indices"),
    (lambda: incentive.grow_cluster(0, [3], half, S), "must be distinct client indices"),
    (lambda: incentive.incentive_clustering(S * 2, None, half), "similarity must be symmetric"),
    (lambda: incentive.incentive_clustering(S[:2], None, half), "square matrix"),
    # split / merge
    (lambda: split_merge.check_thresholds(0.0, 0.0), "--split-threshold must be in"),
    (lambda: split_merge.check_thresholds(0.8, -0.1), "--merge-threshold must be in"),
    (lambda: split_merge.check_thresholds(0.2, 0.3), "must be greater than --merge-threshold"),
    (lambda: split_merge.em_refine(PTS, [0, 0, 1, 1], max_iter=0), "--em-iterations"),
    (lambda: split_merge.em_refine(PTS, [0, 0, 1]), "labels must hold one integer"),
    (lambda: split_merge.em_refine(PTS, [0.0, 0, 1, 1]), "labels must hold one integer"),
    (lambda: split_merge.adjust_clusters(PTS, [0, 0, 1, 1], singletons="x"), "--singletons"),
    (lambda: split_merge.adjust_clusters(PTS, [0, 0, 1, 1], split_method="x"), "--split-method"),
    (lambda: split_merge.adjust_clusters(PTS, [0, 0, 1, 1], split_guard="x"), "--split-guard"),
    (lambda: split_merge.bipartition(PTS[:1]), "at least 2 clients"),
    # aggregation and accounting
    (lambda: noisy_aggregation.clip_updates(U, 0.0), "--clip-norm must be in"),
    (lambda: noisy_aggregation.aggregate_cluster(U, clip_norm=-1.0), "--clip-norm must be in"),
    (
        lambda: noisy_aggregation.aggregate_cluster(U, noise_multiplier=1.0, rng=0),
        "--noise-multiplier needs --clip-norm",
    ),
    (
        lambda: noisy_aggregation.aggregate_cluster(U, clip_norm=1.0, noise_multiplier=1.0),
        "noise needs rng",
    ),
    (
        lambda: noisy_aggregation.aggregate_cluster(U, clip_norm=1.0, noise_multiplier=-1.0),
        "--noise-multiplier must be in",
    ),
    (lambda: noisy_aggregation.aggregate_cluster(U, placement="server"), "--noise-placement"),
    (lambda: noisy_aggregation.aggregate_cluster(U, [1, 2]), "data_sizes must hold one value"),
    (lambda: noisy_aggregation.noise_std(1.0, 1.0, [0.5, 0.6]), "weights must sum to 1"),
    (lambda: accounting.privacy_spent(0.0, 10, 1e-5), "--noise-multiplier must be in"),
    (lambda: accounting.privacy_spent(1.0, 0, 1e-5), "--rounds must be an integer"),
    (lambda: accounting.privacy_spent(1.0, 10, 0.0), "--dp-delta must be in"),
    (lambda: accounting.privacy_spent(1.0, 10, 1.0), "--dp-delta must be in"),
    (lambda: accounting.privacy_spent(1.0, 10, 1e-5, 0.0), "--sampling-rate"),
    (lambda: accounting.privacy_spent(1.0, 10, 1e-5, 1.5), "--sampling-rate"),
    (lambda: accounting.noise_multiplier_for(0.0, 1e-5, 10), "--dp-epsilon must be in"),
    (lambda: accounting.noise_multiplier_for(-1.0, 1e-5, 10), "--dp-epsilon must be in"),
    (lambda: accounting.noise_multiplier_for(1.0, float("nan"), 10), "--dp-delta"),
    # CFL
    (lambda: cfl.split_criterion(U, eps1=0.0, eps2=1.0), "--cfl-eps1"),
    (lambda: cfl.split_criterion(U, eps1=1.0, eps2=float("inf")), "--cfl-eps2"),
    (lambda: cfl.split_criterion(U, eps1=1.0, eps2=1.0, min_size=1), "--cfl-min-size"),
    (lambda: cfl.optimal_bipartition(S, "ward"), "--cfl-linkage"),
    (lambda: cfl.optimal_bipartition(S[:1, :1]), "at least 2 clients"),
    (lambda: cfl.max_cross_similarity(S, [0, 1], [1, 2]), "disjoint"),
    (lambda: cfl.fixed_k_clusters(U, 4, seed=0), "--clusters must be at most 3"),
    (lambda: cfl.fixed_k_clusters(U, 0, seed=0), "--clusters must be an integer"),
    (lambda: cfl.fixed_k_clusters(U, 2, seed=-1), "--seed must be"),
    # metrics
    (lambda: metrics.adjusted_rand_index([0, 1], [0, 1, 1]), "same clients"),
    (lambda: metrics.membership_jaccard([0, 1], [0, 1], per="round"), "--jaccard-per"),
    (lambda: metrics.membership_jaccard({"a": 0}, {"b": 0}), "share no client"),
    (lambda: metrics.run_stability([[0, 1]]), "at least 2 rounds"),
    (lambda: metrics.rounds_to_fraction_of_peak([0.5, float("nan")]), "finite vector"),
    (lambda: metrics.rounds_to_fraction_of_peak([50.0, 90.0]), "fractions in"),
    (lambda: metrics.rounds_to_fraction_of_peak([0.5], 0.0), "--peak-fraction"),
    (lambda: metrics.rounds_to_accuracy([0.5], 1.5), "--target-accuracy"),
]


@pytest.mark.parametrize(("call", "message"), BAD, ids=[m for _, m in BAD])
def test_bad_input_is_a_config_error_naming_it(call, message):
    with pytest.raises(ConfigError, match=message):
        call()


@pytest.mark.parametrize(
    "module", [similarity, incentive, split_merge, noisy_aggregation, cfl, metrics]
)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


def test_public_names():
    assert sorted(ascfl.__all__) == ascfl.__all__
    assert all(hasattr(ascfl, name) for name in ascfl.__all__)
