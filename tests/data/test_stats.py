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


def test_split_counts_report_what_each_split_keeps():
    from fedprune.data.stats import split_counts

    rng = np.random.default_rng(0)
    subject = np.repeat([1, 2, 3], [9, 10, 20])  # WISDM's protocol drops user 1 (< 10)
    data = WindowedDataset(
        name="wisdm",
        x=rng.normal(size=(39, 4, 3)).astype(np.float32),
        y=np.zeros(39, dtype=np.int64),
        subject=subject,
        class_names=("a",),
        channel_names=("acc_x", "acc_y", "acc_z"),
    )
    by_split = {s.split: s for s in split_counts(data)}
    # time-ordered: users 2 and 3, 8 + 16 train, 2 + 4 test windows
    ordered = by_split["time-ordered"]
    assert (ordered.clients, ordered.clients_left_out) == (2, 1)
    assert (ordered.train_windows, ordered.test_windows) == (24, 6)
    # random: all users; round(0.2 n) test windows per class: 2 + 2 + 4
    random = by_split["random"]
    assert (random.clients, random.train_windows, random.test_windows) == (3, 31, 8)
    assert random.row() == ("Split random", "3 clients; 31 train / 8 test windows")
