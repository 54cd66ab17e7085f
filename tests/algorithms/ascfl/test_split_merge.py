import numpy as np
import pytest

from fedprune.algorithms.ascfl import split_merge
from fedprune.algorithms.ascfl.split_merge import (
    adjust_clusters,
    bipartition,
    cluster_centers,
    dispersion_separation,
    dynamic_adjustment,
    em_refine,
)
from fedprune.errors import ConfigError


def test_m_step_centres_are_data_size_weighted():
    x = np.array([[0.0, 0.0], [4.0, 0.0], [9.0, 9.0]])
    centres = cluster_centers(x, np.array([0, 0, 1]), np.array([0.1, 0.3, 0.6]))
    assert centres == pytest.approx(np.array([[3.0, 0.0], [9.0, 9.0]]))


def test_em_moves_a_misassigned_client_and_converges():
    x = np.array([[0.0, 0.0], [0.0, 1.0], [10.0, 0.0], [10.0, 1.0]])
    # centres (10/3, 1/3) and (10, 1): client 2 is 6.67 from the first, 1 from the second
    result = em_refine(x, [0, 0, 0, 1])
    assert result.labels.tolist() == [0, 0, 1, 1]
    assert result.iterations == 2 and result.converged
    assert result.centers == pytest.approx(np.array([[0.0, 0.5], [10.0, 0.5]]))


def test_em_drops_a_cluster_left_empty():
    x = np.array([[0.0], [1.0], [10.0]])
    # cluster 1 = {1} has centre 1, cluster 2 = {0, 2} centre 5: client 0 moves to cluster 1
    # (distance 1 < 5) and client 2 stays; then {0, 1} and {2}
    result = em_refine(x, [7, 3, 7])
    assert result.labels.tolist() == [0, 0, 1]
    assert em_refine(x, [0, 0, 0], max_iter=1).labels.tolist() == [0, 0, 0]


def test_g_on_a_hand_made_configuration():
    x = np.array([[0.0, 0.0], [2.0, 0.0], [9.0, 1.0], [11.0, -1.0]])
    g = dispersion_separation(x, [0, 0, 1, 1])
    # centres (1, 0) and (10, 0); D = 1 and sqrt 2; S = 9 for both
    assert g.centers == pytest.approx(np.array([[1.0, 0.0], [10.0, 0.0]]))
    assert g.dispersion == pytest.approx([1.0, np.sqrt(2)])
    assert g.separation == pytest.approx([9.0, 9.0])
    assert g.ratio == pytest.approx([1 / 9, np.sqrt(2) / 9])
    assert g.nearest.tolist() == [1, 0]
    # data sizes move the centroid, D stays the unweighted mean distance to it
    weighted = dispersion_separation(x, [0, 0, 1, 1], [1, 3, 1, 1])
    assert weighted.centers[0] == pytest.approx([1.5, 0.0])
    assert weighted.dispersion[0] == pytest.approx((1.5 + 0.5) / 2)
    assert weighted.separation[0] == pytest.approx(8.5)


def test_g_edge_cases():
    one = dispersion_separation(np.array([[0.0], [2.0]]), [0, 0])
    assert np.isnan(one.ratio[0]) and one.nearest.tolist() == [-1]
    # coinciding centroids: inf when the cluster is spread, 0 when it is not
    same = dispersion_separation(np.array([[-1.0], [1.0], [0.0]]), [0, 0, 1])
    assert same.ratio.tolist() == [np.inf, 0.0]
    # on unit vectors the distances are between directions: (1, 0) and (0, 5) are sqrt 2 apart
    unit = dispersion_separation(np.array([[3.0, 0.0], [0.0, 5.0]]), [0, 1], normalize=True)
    assert unit.separation == pytest.approx([np.sqrt(2), np.sqrt(2)])


def test_two_means_bipartition_by_the_farthest_pair():
    x = np.array([[0.0, 0.0], [5.0, 0.0], [0.0, 1.0], [5.0, 1.0], [1.0, 0.5]])
    assert bipartition(x).tolist() == [False, True, False, True, False]
    cos = bipartition(
        np.array([[1.0, 0.1], [-1.0, 0.0], [2.0, -0.1]]), split_method="min_cross_similarity"
    )
    assert cos.tolist() == [False, True, False]


SPREAD = np.array([[0.0, 0.0], [0.0, 2.0], [8.0, 0.0], [8.0, 2.0], [4.0, 4.5], [4.0, 5.5]])


def test_a_dispersed_cluster_is_split_and_not_merged():
    # cluster 0: centre (4, 1), D = sqrt 17 = 4.12; cluster 1: centre (4, 5), D = 0.5; S = 4
    adj = adjust_clusters(SPREAD, [0, 0, 0, 0, 1, 1])
    assert adj.geometry.ratio == pytest.approx([np.sqrt(17) / 4, 0.5 / 4])
    assert adj.labels.tolist() == [0, 0, 1, 1, 2, 2]
    assert adj.splits == ((frozenset({0, 1}), frozenset({2, 3})),)
    # cluster 1 has G = 0.125 < 0.2 but its only neighbour was just split
    assert adj.merges == ()
    # with a higher split threshold nothing is split, and cluster 1 does not merge into
    # cluster 0 either: the union would be the only cluster left, whose G is undefined
    calm = adjust_clusters(SPREAD, [0, 0, 0, 0, 1, 1], split_threshold=1.1)
    assert calm.splits == () and calm.merges == ()
    assert calm.labels.tolist() == [0, 0, 0, 0, 1, 1]


THREE = np.array([[0.0, 0.0], [0.0, 1.0], [3.0, 0.0], [3.0, 1.0], [100.0, 0.0], [100.0, 1.0]])


def test_compact_neighbours_merge_unless_the_union_would_split():
    adj = adjust_clusters(THREE, [0, 0, 1, 1, 2, 2])
    # G = 0.5/3, 0.5/3, 0.5/97: all below 0.2. Cluster 2 goes first; its union with cluster 1
    # has centre (51.5, 0.5), D = 48.5 and S = 51.5, G = 0.94 > 0.8: refused. Clusters 0 and 1
    # merge: centre (1.5, 0.5), D = 1.5, S = 98.5.
    assert adj.geometry.ratio == pytest.approx([1 / 6, 1 / 6, 0.5 / 97])
    assert adj.merges == ((frozenset({0, 1}), frozenset({2, 3})),)
    assert adj.labels.tolist() == [0, 0, 0, 0, 1, 1]


def test_a_split_is_not_undone_by_the_next_merge():
    split_before = ((frozenset({0, 1, 9}), frozenset({2, 3})),)  # client 9 left since
    adj = adjust_clusters(THREE, [0, 0, 1, 1, 2, 2], previous_splits=split_before)
    assert adj.merges == ()
    assert adj.labels.tolist() == [0, 0, 1, 1, 2, 2]


def test_singletons_are_kept_unless_asked():
    x = np.array([[0.0, 0.0], [0.0, 1.0], [2.0, 0.5], [100.0, 0.0], [100.0, 1.0]])
    labels = [0, 0, 1, 2, 2]  # client 2 alone, 2 from cluster 0's centre (0, 0.5)
    kept = adjust_clusters(x, labels)
    assert kept.geometry.ratio[1] == 0.0  # a singleton has no dispersion
    assert kept.merges == () and kept.labels.tolist() == [0, 0, 1, 2, 2]
    merged = adjust_clusters(x, labels, singletons="merge")
    # the singleton (G = 0) goes first and joins cluster 0: union centre (2/3, 0.5),
    # D = (0.83 + 0.83 + 1.33) / 3 = 1, S = 99.3
    assert merged.merges == ((frozenset({2}), frozenset({0, 1})),)
    assert merged.labels.tolist() == [0, 0, 0, 1, 1]


# Cluster 0: the six unit vectors e1..e6 (every pair sqrt 2 apart: like updates whose
# directions are all noise), centre 1/6 on each, D = sqrt(25/36 + 5/36) = 0.913. Cluster 1:
# a compact pair around that centre + e7 (S = 1 for both): G = 0.913 and 0.1.
NOISE = np.zeros((8, 9))
NOISE[np.arange(6), np.arange(6)] = 1.0
NOISE[6:, :6] = 1 / 6
NOISE[6:, 6] = 1.0
NOISE[6, 7], NOISE[7, 7] = 0.1, -0.1


def test_the_split_guard_refuses_halves_that_would_split_again():
    labels = [0] * 6 + [1, 1]
    literal = adjust_clusters(NOISE, labels)
    # two-means is seeded by e1 and e2 (the first farthest pair); e3..e6 are equidistant and
    # go to e1's side: the split is {e2} against the rest
    assert literal.geometry.ratio == pytest.approx([np.sqrt(30 / 36), 0.1])
    assert literal.splits == ((frozenset({0, 2, 3, 4, 5}), frozenset({1})),)
    # that rest (centre 0.2 on five axes, D = sqrt 0.8 = 0.894) has cluster 1's centre as its
    # nearest (sqrt(5/900 + 1/36 + 1) = 1.017): G = 0.88 > 0.8, so the guard refuses the split
    guarded = adjust_clusters(NOISE, labels, split_guard="halves")
    assert guarded.splits == () and guarded.refused_splits == 1
    assert guarded.labels.tolist() == labels
    # a cluster that holds two groups is still split under the guard: SPREAD's halves have
    # D = 1 and S = sqrt 32 = 5.66 to cluster 1 (G = 0.18)
    assert adjust_clusters(SPREAD, [0, 0, 0, 0, 1, 1], split_guard="halves").splits == (
        (frozenset({0, 1}), frozenset({2, 3})),
    )


def test_the_compact_merge_guard_merges_parts_of_a_group_not_distinct_groups():
    # A = {0, 0.2}, B = {1, 1.2}, C = {4, 4.2}: D = 0.1 each; S = 1, 1, 3; G = 0.1, 0.1, 1/30.
    # C (lowest G) goes first, to its nearest B: B u C has centre 2.6, D = 1.5, S = 2.5 to A,
    # G = 0.6 -- the settled guard (<= 0.8) merges it, the compact guard (<= 0.2) refuses.
    # Then A to B: A u B has centre 0.6, D = 0.5, S = 3.5 to C, G = 1/7 <= 0.2: merged.
    points = np.array([[0.0], [0.2], [1.0], [1.2], [4.0], [4.2]])
    labels = [0, 0, 1, 1, 2, 2]
    settled = adjust_clusters(points, labels)
    assert settled.geometry.ratio == pytest.approx([0.1, 0.1, 1 / 30])
    assert settled.merges == ((frozenset({4, 5}), frozenset({2, 3})),)
    compact = adjust_clusters(points, labels, merge_guard="compact")
    assert [set(pair) for pair in compact.merges] == [{frozenset({0, 1}), frozenset({2, 3})}]
    assert compact.labels.tolist()[:4] == [compact.labels[0]] * 4
    with pytest.raises(ConfigError, match="--merge-guard must be one of"):
        adjust_clusters(points, labels, merge_guard="union")


def test_one_cluster_is_left_alone():
    adj = adjust_clusters(SPREAD, [0] * 6)
    assert adj.splits == () and adj.merges == () and adj.labels.tolist() == [0] * 6


def test_dynamic_adjustment_runs_em_then_split_merge():
    em, adj = dynamic_adjustment(THREE, [0, 0, 1, 2, 2, 2])
    assert em.labels.tolist() == [0, 0, 1, 1, 2, 2]
    assert adj.labels.tolist() == [0, 0, 0, 0, 1, 1]


def test_split_threshold_must_exceed_merge_threshold():
    with pytest.raises(ConfigError, match="--split-threshold .* must be greater"):
        adjust_clusters(THREE, [0, 0, 1, 1, 2, 2], split_threshold=0.2, merge_threshold=0.2)


def test_dynamic_adjustment_refuses_an_unknown_keyword_before_em(monkeypatch):
    ran = []
    monkeypatch.setattr(split_merge, "em_refine", lambda *a, **k: ran.append(1))
    with pytest.raises(TypeError, match="split_treshold"):
        dynamic_adjustment(THREE, [0, 0, 1, 2, 2, 2], split_treshold=0.5)
    assert not ran
