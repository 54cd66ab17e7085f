"""The label-histogram clustering signal (fast)."""

import doctest

import numpy as np
import pytest

from fedprune.algorithms.caafp import label_histograms as module
from fedprune.algorithms.caafp.choose_k import choose_clusters
from fedprune.algorithms.caafp.clustering import cluster_clients
from fedprune.algorithms.caafp.label_histograms import label_histograms


def test_shape_and_values_of_a_hand_made_client_set():
    labels = [
        np.array([0, 0, 0, 1]),  # 3/4 walking, 1/4 upstairs
        np.array([2, 2]),  # one class only
        np.array([0, 1, 2, 3, 4, 5]),  # every class once
        np.array([5, 5, 5, 5, 5, 0, 0, 0, 0, 0]),
    ]
    h = label_histograms(labels, 6)
    assert h.shape == (4, 6) and h.dtype == np.float64
    assert h.tolist() == [
        [3 / 4, 1 / 4, 0, 0, 0, 0],
        [0, 0, 1, 0, 0, 0],
        [1 / 6] * 6,
        [1 / 2, 0, 0, 0, 0, 1 / 2],
    ]
    assert np.allclose(h.sum(axis=1), 1.0)


def test_the_number_of_windows_is_not_revealed():
    small, large = label_histograms([np.array([0, 1]), np.repeat([0, 1], 50)], 3)
    assert small.tolist() == large.tolist() == [0.5, 0.5, 0.0]


def test_one_class_clients_cluster_by_class():
    labels = [np.full(n, c) for n, c in zip((5, 9, 3, 7, 4, 6), (0, 0, 1, 1, 2, 2))]
    h = label_histograms(labels, 4)
    choice = choose_clusters(h, max_clusters=5)
    assert choice.chosen == 3 and choice.silhouettes[3] == pytest.approx(1.0)
    assert cluster_clients(h, 3).tolist() == [0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize(
    "labels, message",
    [
        ([np.array([], dtype=np.int64)], "client 0 has no training windows"),
        ([np.array([0]), np.array([3])], r"client 1's labels must be integers in \[0, 3\)"),
        ([np.array([-1])], "must be integers"),
        ([np.array([0.5])], "must be integers"),
    ],
)
def test_bad_labels(labels, message):
    with pytest.raises(ValueError, match=message):
        label_histograms(labels, 3)


def test_docstring_examples():
    assert doctest.testmod(module).failed == 0
