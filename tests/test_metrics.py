import numpy as np
import pytest

from fedprune.metrics import accuracy, fairness, transfer_bytes_eq13


def test_accuracy():
    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    assert accuracy(np.array([0, 1, 1]), probs) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        accuracy(np.array([]), np.zeros((0, 2)))


def test_fairness_is_population_std_of_fractions():
    assert fairness({1: 0.9, 2: 0.7}) == pytest.approx(0.1)
    assert fairness(np.array([0.5, 0.5, 0.5])) == 0.0


def test_eq13_transfer_bytes():
    assert transfer_bytes_eq13(89254) == 89254 * 4
    assert transfer_bytes_eq13(1000, 0.7) == pytest.approx(1200.0)
    with pytest.raises(ValueError):
        transfer_bytes_eq13(10, 1.5)
