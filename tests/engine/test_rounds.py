import pytest

from fedprune.engine.rounds import sample_clients
from fedprune.errors import ConfigError


def test_sampling_is_a_function_of_seed_and_round():
    ids = list(range(1, 31))
    a = sample_clients(ids, 10, seed=0, round_num=4)
    assert a == sample_clients(ids, 10, seed=0, round_num=4)
    assert len(set(a)) == 10 and set(a) <= set(ids)
    assert a != sample_clients(ids, 10, seed=0, round_num=5)
    assert sample_clients(ids, 30, seed=0, round_num=1) == ids


def test_bad_count():
    with pytest.raises(ConfigError):
        sample_clients([1, 2], 0, 0, 1)
    with pytest.raises(ConfigError, match=r"at most 2 \(the clients\), got 3"):
        sample_clients([1, 2], 3, 0, 1)  # never fewer than asked for, silently


def test_cluster_quota_proportional_with_one_each():
    from fedprune.engine.rounds import cluster_quota

    assert cluster_quota([27, 2, 1], 10) == [8, 1, 1]
    assert cluster_quota([10, 10, 10], 10) == [4, 3, 3]
    assert cluster_quota([1, 1, 1, 1], 2) == [1, 1, 1, 1]  # every cluster trains
    assert cluster_quota([2, 1], 10) == [2, 1]  # never more than a cluster has


def test_sample_by_cluster_is_seeded_and_within_clusters():
    from fedprune.engine.rounds import sample_by_cluster

    cluster_of = {i: (0 if i < 20 else 1 if i < 28 else 2) for i in range(30)}
    a = sample_by_cluster(cluster_of, 10, seed=1, round_num=3)
    assert a == sample_by_cluster(cluster_of, 10, seed=1, round_num=3)
    assert sum(len(v) for v in a.values()) == 10
    assert all(cluster_of[i] == c for c, ids in a.items() for i in ids)
