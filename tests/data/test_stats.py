import numpy as np
import pytest

from fedprune.data.registry import load_windows
from fedprune.data.stats import heterogeneity
from fedprune.data.windows import WindowedDataset


def test_hand_computed_table1_figures():
    # subject 1: 2 windows (classes 0, 1), subject 2: 4 windows (class 0 only)
    x = np.zeros((6, 2, 3), dtype=np.float32)
    x[:2, :, 0] = 3.0  # |acc| = 3 for subject 1
    x[2:, :, 1] = 5.0  # |acc| = 5 for subject 2
    data = WindowedDataset(
        "toy",
        x,
        np.array([0, 1, 0, 0, 0, 0]),
        np.array([1, 1, 2, 2, 2, 2]),
        ("a", "b"),
        ("acc_x", "acc_y", "acc_z"),
    )
    h = heterogeneity(data)
    assert (h.windows_mean, h.windows_std) == (3.0, 1.0)
    assert h.quantity_cv == pytest.approx(1 / 3)
    assert (h.clients_missing_classes, h.missing_rate) == (1, 0.5)
    assert h.feature_cv == pytest.approx(1 / 4)  # magnitudes 3 and 5: std 1, mean 4


@pytest.mark.real_data
def test_real_table1(real_data):
    uci = heterogeneity(load_windows("uci_har", real_data))
    assert round(100 * uci.quantity_cv, 1) == 10.2  # paper: 10.2 %
    assert (round(uci.windows_mean), round(uci.windows_std)) == (343, 35)  # paper: 343 ± 35
    assert uci.clients_missing_classes == 0
    w = heterogeneity(load_windows("wisdm", real_data))
    assert (w.clients_missing_classes, w.num_clients) == (17, 36)  # paper: 17 / 36
