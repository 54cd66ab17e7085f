import numpy as np
import pytest

from fedprune.algorithms.caafp.clustering import cluster_clients, cosine_distance_matrix
from fedprune.errors import ConfigError


def test_cosine_distance_matches_eq4():
    u = np.array([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0], [1.0, 1.0]])
    d = cosine_distance_matrix(u)
    assert d[0, 1] == pytest.approx(1.0)
    assert d[0, 2] == pytest.approx(2.0)
    assert d[0, 3] == pytest.approx(1 - 1 / np.sqrt(2))
    assert np.allclose(d, d.T) and np.all(np.diag(d) == 0)


def test_clusters_follow_update_directions_not_magnitudes():
    rng = np.random.default_rng(0)
    a, b, c = rng.normal(size=(3, 50))
    updates = np.stack([a, 10 * a, b, 0.1 * b + 0.01 * c, c, 3 * c])
    assert cluster_clients(updates, 3).tolist() == [0, 0, 1, 1, 2, 2]


def test_bad_cluster_counts():
    with pytest.raises(ConfigError, match="clusters K"):
        cluster_clients(np.eye(3), 4)
    assert cluster_clients(np.eye(3), 1).tolist() == [0, 0, 0]
