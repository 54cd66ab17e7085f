import numpy as np
import pytest

from fedprune.algorithms.ascfl.incentive import (
    admits,
    candidate_count,
    grow_cluster,
    incentive_clustering,
    most_similar,
    representativeness,
)
from fedprune.algorithms.ascfl.metrics import adjusted_rand_index
from fedprune.errors import ConfigError


def test_absolute_gain_counts_points_and_absorbs_rounding():
    assert admits("absolute_gain", 0.70, 0.73)  # 0.73 - 0.70 = 0.0299999... in floats
    assert not admits("absolute_gain", 0.70, 0.7299)
    assert admits("absolute_gain", 0.5, 0.6, gain=0.1)


def test_relative_gain():
    assert admits("relative_gain", 0.70, 0.721)  # 1.03 * 0.70 = 0.721
    assert not admits("relative_gain", 0.70, 0.72)
    assert not admits("relative_gain", 0.90, 0.92)  # +2 points < +3 %


def test_accuracy_floor_needs_the_floor_and_an_improvement():
    assert admits("accuracy_floor", 0.84, 0.86, theta=0.85)
    assert not admits("accuracy_floor", 0.80, 0.84, theta=0.85)  # below the floor
    assert not admits("accuracy_floor", 0.90, 0.89, theta=0.85)  # above it but worse


def test_retained_ratio_admits_a_client_that_keeps_theta_of_the_accuracy():
    assert admits("retained_ratio", 0.80, 0.69, theta=0.85)  # 0.69 >= 0.68
    assert admits("retained_ratio", 0.80, 0.68, theta=0.85)  # exactly 0.85 x 0.80
    assert not admits("retained_ratio", 0.80, 0.67, theta=0.85)
    assert not admits("retained_ratio", 0.80, 0.69, theta=0.90)  # 0.69 < 0.72
    assert admits("retained_ratio", 0.0, 0.0, theta=0.85)  # nothing to lose


def test_similarity_gate_needs_the_similarity_and_an_improvement():
    assert admits("similarity_gate", 0.5, 0.51, theta=0.85, similarity=0.9)
    assert not admits("similarity_gate", 0.5, 0.51, theta=0.85, similarity=0.8)
    assert not admits("similarity_gate", 0.5, 0.5, theta=0.85, similarity=0.9)
    with pytest.raises(ConfigError, match="similarity_gate needs"):
        admits("similarity_gate", 0.5, 0.6)


class Scripted:
    """evaluate() from a table of member tuples -> accuracy, recording every call."""

    def __init__(self, table):
        self.table = table
        self.calls = []

    def __call__(self, members):
        self.calls.append(members)
        return self.table[members]


SIM4 = np.array(
    [
        [1.0, 0.9, 0.8, 0.7],
        [0.9, 1.0, 0.5, 0.5],
        [0.8, 0.5, 1.0, 0.5],
        [0.7, 0.5, 0.5, 1.0],
    ]
)
TABLE = {(0,): 0.50, (0, 1): 0.56, (0, 1, 2): 0.58, (0, 1, 3): 0.70}


def test_growth_stops_at_the_first_client_that_fails():
    evaluate = Scripted(TABLE)
    grown = grow_cluster(0, [1, 2, 3], evaluate, SIM4)
    # +6 points admits client 1; +2 points fails for client 2 and the search stops
    assert grown.members == (0, 1)
    assert grown.accuracy == 0.56 and grown.seed_accuracy == 0.50
    assert evaluate.calls == [(0,), (0, 1), (0, 1, 2)]
    assert [(t.client, t.admitted) for t in grown.trials] == [(1, True), (2, False)]
    assert grown.trials[1].similarity == pytest.approx((0.8 + 0.5) / 2)
    assert grown.evaluations == 3


def test_growth_without_stopping_tries_every_candidate_once():
    evaluate = Scripted(TABLE)
    grown = grow_cluster(0, [1, 2, 3], evaluate, SIM4, stop_at_first_failure=False)
    assert grown.members == (0, 1, 3)  # 0.56 -> 0.70 for client 3
    assert grown.accuracy == 0.70
    assert evaluate.calls == [(0,), (0, 1), (0, 1, 2), (0, 1, 3)]


def test_growth_under_the_similarity_gate():
    # client 1 (0.9 to the seed) passes the gate; client 2's mean similarity to {0, 1} is 0.65
    grown = grow_cluster(0, [1, 2, 3], Scripted(TABLE), SIM4, rule="similarity_gate", theta=0.85)
    assert grown.members == (0, 1)
    assert [t.admitted for t in grown.trials] == [True, False]


def test_candidate_count():
    assert candidate_count(20, 19) == 4  # ceil(0.2 * 20)
    assert candidate_count(20, 3) == 3  # capped by the unassigned clients
    assert candidate_count(20, 3, base="unassigned") == 1  # ceil(0.2 * 3)
    assert candidate_count(15, 14) == 3  # 0.2 * 15 is 3.0000000000000004 in floats
    assert candidate_count(20, 0) == 0
    assert candidate_count(3, 2, fraction=0.01) == 1  # at least one


def test_most_similar_breaks_ties_by_index():
    s = np.array([[1.0, 0.5, 0.9, 0.9], [0.5, 1, 0, 0], [0.9, 0, 1, 0], [0.9, 0, 0, 1]])
    assert most_similar(s, 0, [1, 2, 3], 2) == [2, 3]
    assert most_similar(s, 0, [3, 1, 2], 3) == [2, 3, 1]


def test_representativeness_by_hand():
    s = np.array([[1.0, 0.8, -0.2], [0.8, 1.0, 0.4], [-0.2, 0.4, 1.0]])
    # affinities (1 + S) / 2: a01 = 0.9, a02 = 0.4, a12 = 0.7
    sizes = [1.0, 2.0, 1.0]
    own = representativeness(s, sizes, [0, 1, 2], "own_size")
    assert own == pytest.approx([1 * (0.9 + 0.4) / 2, 2 * (0.9 + 0.7) / 2, 1 * (0.4 + 0.7) / 2])
    neighbour = representativeness(s, sizes, [0, 1, 2], "neighbour_size")
    assert neighbour == pytest.approx(
        [(2 * 0.9 + 1 * 0.4) / 3, (1 * 0.9 + 1 * 0.7) / 2, (1 * 0.4 + 2 * 0.7) / 3]
    )
    # restricted to the unassigned clients
    assert representativeness(s, sizes, [0, 2]) == pytest.approx([0.4, 0.4])


def _two_groups_and_an_outlier():
    group = np.array([0, 0, 0, 1, 1, 1, 2])  # client 6 belongs to neither group
    s = np.where(group[:, None] == group[None, :], 0.9, -0.5)
    s[6, :3] = s[:3, 6] = 0.3
    s[6, 3:6] = s[3:6, 6] = 0.2
    np.fill_diagonal(s, 1.0)

    def evaluate(members):
        counts = np.bincount(group[list(members)], minlength=3)
        majority = counts.max()
        return 0.4 + 0.1 * majority - 0.2 * (len(members) - majority)

    return group, s, evaluate


def test_incentive_clustering_finds_the_groups_and_leaves_the_outlier_alone():
    group, s, evaluate = _two_groups_and_an_outlier()
    calls = []
    result = incentive_clustering(
        s,
        [1, 1, 3, 1, 1, 1, 1],  # client 2 is the largest: the first seed
        lambda m: calls.append(m) or evaluate(m),
        candidate_fraction=0.5,  # ceil(3.5) = 4 candidates
    )
    assert result.labels.tolist() == [0, 0, 0, 1, 1, 1, 2]
    assert [c.members for c in result.clusters] == [(2, 0, 1), (3, 4, 5), (6,)]
    # seed 2 tries 0, 1 (0.9) then 6 (0.3), which lowers accuracy: stop before client 3
    assert calls[:4] == [(2,), (2, 0), (2, 0, 1), (2, 0, 1, 6)]
    assert result.evaluations == len(calls) == 4 + 4 + 1
    assert adjusted_rand_index(result.labels, group) == 1.0


def test_evaluate_must_return_an_accuracy():
    with pytest.raises(ConfigError, match=r"evaluate\(0,\) returned 1.5"):
        grow_cluster(0, [1], lambda m: 1.5, SIM4)
    with pytest.raises(ConfigError, match="returned nan"):
        grow_cluster(0, [1], lambda m: float("nan"), SIM4)
    with pytest.raises(ConfigError, match="must return a number"):
        grow_cluster(0, [1], lambda m: "0.5", SIM4)
