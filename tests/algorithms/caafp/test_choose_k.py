"""Choosing K from the silhouette (fast: numpy and scikit-learn only). Orthogonal unit
vectors have cosine distance exactly 1 between them and 0 to copies of themselves, so every
expected silhouette is arithmetic written in the assertion."""

import doctest

import numpy as np
import pytest

from fedprune.algorithms.caafp import choose_k
from fedprune.algorithms.caafp.choose_k import (
    MIN_SILHOUETTE,
    best_k,
    choose_clusters,
    pick_k,
    silhouettes_by_k,
)
from fedprune.algorithms.caafp.clustering import cluster_clients
from fedprune.errors import ConfigError

E = np.eye(3)


def test_three_tight_groups_give_three():
    updates = np.repeat(E, 2, axis=0)  # clients 0-1 along e1, 2-3 along e2, 4-5 along e3
    choice = choose_clusters(updates, max_clusters=8)  # tried: K = 2..5 (N - 1)
    s = choice.silhouettes
    assert sorted(s) == [2, 3, 4, 5]
    # K = 2 merges two groups: their 4 clients have a = (0 + 1 + 1) / 3, b = 1, s = 1/3;
    # the third group's 2 clients have a = 0, b = 1, s = 1
    assert s[2] == pytest.approx((4 * (1 - 2 / 3) + 2 * 1) / 6)
    assert s[3] == pytest.approx(1.0)
    assert s[4] == pytest.approx(4 / 6)  # one group split into two singletons (s = 0)
    assert s[5] == pytest.approx(2 / 6)  # two groups split
    assert choice.best == choice.chosen == 3
    assert cluster_clients(updates, choice.chosen).tolist() == [0, 0, 1, 1, 2, 2]


def test_one_blob_gives_one():
    # equidistant clients (cosine distance 1 between every pair): for every cut, a = b = 1 (or
    # a singleton), so every silhouette is 0, below any positive threshold
    choice = choose_clusters(np.eye(5), max_clusters=8)
    assert choice.silhouettes == pytest.approx({2: 0.0, 3: 0.0, 4: 0.0})
    assert choice.chosen == 1
    assert choice.best == 2  # the smaller K of a tie, recorded although not taken


def test_two_groups_give_two():
    updates = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0], [0.0, 3.0]])  # magnitudes differ
    choice = choose_clusters(updates, max_clusters=8)
    # K = 3 splits a group: its members are singletons (0), the other pair keeps 1
    assert choice.silhouettes == pytest.approx({2: 1.0, 3: 2 / 4})
    assert choice.chosen == 2


def test_silhouettes_from_a_distance_matrix():
    # two pairs, 0.2 apart within a pair, 1.0 between pairs
    d = np.array(
        [[0.0, 0.2, 1.0, 1.0], [0.2, 0.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.2], [1.0, 1.0, 0.2, 0.0]]
    )
    s = silhouettes_by_k(d, max_clusters=3)
    assert s[2] == pytest.approx((1.0 - 0.2) / 1.0)
    assert s[3] == pytest.approx((2 * 0.8 + 2 * 0.0) / 4)


def test_the_threshold_is_reached_at_equality():
    silhouettes = {2: 0.8, 3: 0.4}
    assert pick_k(silhouettes, 0.8) == 2
    assert pick_k(silhouettes, 0.8 + 1e-9) == 1
    assert pick_k({2: 0.0, 3: 0.0}, 0.0) == 2
    assert pick_k({2: MIN_SILHOUETTE - 1e-6, 5: MIN_SILHOUETTE - 1e-3}) == 1
    assert pick_k({2: MIN_SILHOUETTE, 5: MIN_SILHOUETTE - 1e-3}) == 2


def test_ties_go_to_the_smaller_k():
    assert best_k({4: 0.5, 2: 0.5, 3: 0.1}) == 2
    assert best_k({2: 0.1, 3: 0.6, 4: 0.6}) == 3


def test_threshold_passed_to_choose_clusters():
    updates = np.repeat(E, 2, axis=0)
    assert choose_clusters(updates, 8, min_silhouette=1.0).chosen == 3
    kept = choose_clusters(updates, 8, min_silhouette=1.5)
    assert kept.chosen == 1 and kept.min_silhouette == 1.5


def test_max_clusters_bounds_the_ks_tried():
    updates = np.repeat(E, 2, axis=0)
    assert sorted(choose_clusters(updates, max_clusters=2).silhouettes) == [2]
    assert choose_clusters(updates, max_clusters=2).chosen == 2  # 3 was not tried
    assert sorted(choose_clusters(updates, max_clusters=100).silhouettes) == [2, 3, 4, 5]


@pytest.mark.parametrize("clients", [1, 2])
def test_too_few_clients_to_choose(clients):
    with pytest.raises(ConfigError, match="at least 3 clients"):
        choose_clusters(np.eye(3)[:clients], max_clusters=8)


def test_max_clusters_below_two_is_refused():
    with pytest.raises(ConfigError, match="--max-clusters must be an integer >= 2"):
        choose_clusters(np.eye(4), max_clusters=1)


def test_the_record_is_json_ready():
    record = choose_clusters(np.repeat(E, 2, axis=0), 3).record()
    assert record["chosen"] == 3 and record["min_silhouette"] == MIN_SILHOUETTE
    assert record["silhouette"] == {"2": pytest.approx(5 / 9), "3": pytest.approx(1.0)}


def test_docstring_examples():
    assert doctest.testmod(choose_k).failed == 0
