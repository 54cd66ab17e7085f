import numpy as np
import pytest

from fedprune.algorithms.caafp.communication import eq13_bytes, payload_bytes
from fedprune.engine.metrics import accuracy, fairness


def test_accuracy():
    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    assert accuracy(np.array([0, 1, 1]), probs) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        accuracy(np.array([]), np.zeros((0, 2)))


def test_fairness_is_population_std_of_fractions():
    assert fairness({1: 0.9, 2: 0.7}) == pytest.approx(0.1)
    assert fairness(np.array([0.5, 0.5, 0.5])) == 0.0


def test_eq13_transfer_bytes():
    assert eq13_bytes(89254, 0.0) == 89254 * 4
    assert eq13_bytes(1000, 0.7) == pytest.approx(1200.0)
    with pytest.raises(ValueError):
        eq13_bytes(10, 1.5)


def test_payload_bitmask_plus_values():
    # 1000 params, 900 prunable of which 270 active: 113 B mask + 270*4 + 100*4
    assert payload_bytes(1000, 900, 270) == 113 + 1080 + 400
    assert payload_bytes(1000, 900, 900) == 4000  # dense is smaller than mask + values
    assert payload_bytes(1000, 900, 270, n_units=60) == 8 + 1080 + 400  # 1 bit per block
    with pytest.raises(ValueError):
        payload_bytes(10, 20, 5)


def test_noise_summary_splits_the_mean_accuracy_by_noisy_and_clean_clients():
    from fedprune.engine.metrics import noise_summary

    acc = {1: 0.5, 2: 0.7, 3: 0.9, 4: 1.0}
    assert noise_summary([3, 1], acc) == {"clients": [1, 3], "noisy_acc": 0.7, "clean_acc": 0.85}
    assert noise_summary([1, 2, 3, 4], acc)["clean_acc"] is None
