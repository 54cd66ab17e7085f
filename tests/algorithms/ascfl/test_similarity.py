import numpy as np
import pytest

from fedprune.algorithms.ascfl.similarity import (
    cosine_similarity_matrix,
    low_rank_similarity,
    rank_for_explained_variance,
    shared_basis_floats,
    uplink_floats,
    uplink_saving,
)
from fedprune.errors import ConfigError, DataError

R2 = np.sqrt(2.0)


def test_cosines_of_three_vectors_by_hand():
    u = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, -2.0, 0.0]])
    s = cosine_similarity_matrix(u)
    expected = np.array(
        [
            [1.0, 1 / R2, 0.0],  # (1,0,0).(1,1,0) = 1 over 1 * sqrt 2
            [1 / R2, 1.0, -1 / R2],  # (1,1,0).(0,-2,0) = -2 over sqrt 2 * 2
            [0.0, -1 / R2, 1.0],
        ]
    )
    assert s == pytest.approx(expected, abs=1e-12)
    # only directions count: scaling clients changes nothing
    assert cosine_similarity_matrix(u * np.array([[5.0], [0.1], [3.0]])) == pytest.approx(s)


def test_per_layer_updates_are_flattened_in_order():
    layers = [
        [np.array([[1.0, 0.0]]), np.array([0.0])],
        [np.array([[1.0, 1.0]]), np.array([0.0])],
        [np.array([[0.0, -2.0]]), np.array([0.0])],
    ]
    flat = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, -2.0, 0.0]])
    assert cosine_similarity_matrix(layers) == pytest.approx(cosine_similarity_matrix(flat))


def test_zero_and_non_finite_updates_name_the_client():
    with pytest.raises(DataError, match="client 1's update is all zeros"):
        cosine_similarity_matrix(np.array([[1.0, 0.0], [0.0, 0.0]]))
    with pytest.raises(DataError, match="client b's update is all zeros"):
        cosine_similarity_matrix(np.array([[1.0, 0.0], [0.0, 0.0]]), client_ids=["a", "b"])
    with pytest.raises(DataError, match="client 2's update contains nan or inf"):
        cosine_similarity_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [np.inf, 1.0]]))
    with pytest.raises(DataError, match="client 1's update has 3 values, client 0's has 2"):
        cosine_similarity_matrix([np.ones(2), np.ones(3)])


def test_rank_for_explained_variance_by_hand():
    # energies 9, 4, 1 of 14: cumulative 0.643, 0.929, 1.0
    assert rank_for_explained_variance([3.0, 2.0, 1.0, 0.0], 0.6) == 1
    assert rank_for_explained_variance([3.0, 2.0, 1.0, 0.0], 0.9) == 2
    assert rank_for_explained_variance([3.0, 2.0, 1.0, 0.0], 0.95) == 3
    assert rank_for_explained_variance([1.0, 3.0, 2.0], 13 / 14) == 2  # exactly reached, unsorted
    assert rank_for_explained_variance([3.0, 2.0, 1.0], 1.0) == 3


def _matrix_with_singular_values(values, n=6, d=8, seed=0):
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.normal(size=(n, len(values))))
    v, _ = np.linalg.qr(rng.normal(size=(d, len(values))))
    return u, np.asarray(values), v, u @ np.diag(values) @ v.T


def test_low_rank_keeps_the_smallest_rank_reaching_the_threshold():
    # energies 16, 9, 1, 0.25 of 26.25: cumulative 0.610, 0.952, 0.990, 1
    u, s, v, x = _matrix_with_singular_values([4.0, 3.0, 1.0, 0.5])
    for threshold, rank in [(0.6, 1), (0.9, 2), (0.95, 2), (0.96, 3), (0.995, 4)]:
        assert low_rank_similarity(x, threshold).rank == rank
    result = low_rank_similarity(x, 0.9)
    assert result.explained_variance == pytest.approx(25 / 26.25)
    # the kept components span the two leading right singular vectors
    assert result.components @ result.components.T == pytest.approx(np.eye(2), abs=1e-12)
    assert result.components.T @ result.components == pytest.approx(v[:, :2] @ v[:, :2].T)
    # coefficients are U_2 S_2 up to the sign of each column, so their Gram matrix is fixed
    z = u[:, :2] * s[:2]
    assert result.coefficients @ result.coefficients.T == pytest.approx(z @ z.T)
    unit = z / np.linalg.norm(z, axis=1, keepdims=True)
    assert result.similarity == pytest.approx(unit @ unit.T)


def test_full_rank_gives_the_full_cosine_matrix():
    _, _, _, x = _matrix_with_singular_values([4.0, 3.0, 1.0, 0.5])
    assert low_rank_similarity(x, 1.0).similarity == pytest.approx(cosine_similarity_matrix(x))


def test_a_client_orthogonal_to_the_kept_components_is_named():
    # singular values ~13.45 and 0.1: one component explains > 99.99 %
    x = np.array([[10.0, 0.0], [9.0, 0.0], [0.0, 0.1]])
    with pytest.raises(DataError, match="client 2's output-layer update is orthogonal"):
        low_rank_similarity(x, 0.95)
    assert low_rank_similarity(x, 1.0).rank == 2


def test_uplink_floats_under_each_reading():
    # 1000 floats in all, output kernel 20 x 10 = 200
    assert uplink_floats(1000, (20, 10), 3, "full") == 1000
    assert uplink_floats(1000, (20, 10), 3, "shared_basis") == 800 + 3
    assert uplink_floats(1000, (20, 10), 3, "client_factors") == 800 + 3 * (20 + 10)
    assert uplink_saving(1000, (20, 10), 3, "client_factors") == pytest.approx(0.11)
    assert uplink_saving(1000, (20, 10), 3, "full") == 0.0


def test_shared_basis_floats_replace_the_whole_factorized_block():
    # the dense head of image_cnn_small: 1568 x 24 + 24 + 24 x 10 + 10 = 37,906 of 51,154
    assert shared_basis_floats(51154, 37906, 16) == 51154 - 37906 + 16
    with pytest.raises(ConfigError, match="compressed"):
        shared_basis_floats(100, 101, 1)
