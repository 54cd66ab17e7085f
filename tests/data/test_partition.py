import numpy as np
import pytest

from fedprune.data.partition import (
    partition_by_subject,
    standardize,
    stratified_split,
    time_ordered_split,
)
from fedprune.data.windows import WindowedDataset
from fedprune.errors import ConfigError


@pytest.mark.parametrize(
    "n, expected_test", [(1, 0), (2, 1), (3, 1), (5, 1), (8, 2), (10, 2), (13, 3)]
)
def test_per_class_test_counts(n, expected_test):
    y = np.zeros(n, dtype=int)
    train, test = stratified_split(y, 0.2, np.random.default_rng(0))
    assert len(test) == expected_test
    assert sorted(np.concatenate([train, test]).tolist()) == list(range(n))


def test_split_is_stratified_and_seeded():
    y = np.repeat(np.arange(3), [10, 5, 1])
    a = stratified_split(y, 0.2, np.random.default_rng(7))
    b = stratified_split(y, 0.2, np.random.default_rng(7))
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    assert np.bincount(y[a[1]], minlength=3).tolist() == [2, 1, 0]


def test_bad_fraction():
    with pytest.raises(ConfigError, match="test fraction"):
        stratified_split(np.zeros(3), 1.0, np.random.default_rng(0))


def _dataset():
    rng = np.random.default_rng(0)
    n = 40
    return WindowedDataset(
        name="toy",
        x=rng.normal(3.0, 2.0, size=(n, 4, 2)).astype(np.float32),
        y=np.tile(np.arange(2), n // 2),
        subject=np.repeat([5, 9], n // 2),
        class_names=("a", "b"),
        channel_names=("c0", "c1"),
    )


def test_one_client_per_subject_and_no_window_lost():
    fed = partition_by_subject(_dataset(), seed=1)
    assert [c.client_id for c in fed.clients] == [5, 9]
    assert sum(len(c.y_train) + len(c.y_test) for c in fed.clients) == 40
    assert all(len(c.y_test) == 4 for c in fed.clients)


def test_client_split_independent_of_other_clients():
    full = partition_by_subject(_dataset(), seed=1)
    data = _dataset()
    keep = data.subject == 9
    only9 = WindowedDataset(
        "toy", data.x[keep], data.y[keep], data.subject[keep], data.class_names, data.channel_names
    )
    np.testing.assert_array_equal(
        partition_by_subject(only9, seed=1).client(9).x_test, full.client(9).x_test
    )


def test_standardization_uses_training_windows_only():
    client = partition_by_subject(_dataset(), seed=1).clients[0]
    z = standardize(client)
    np.testing.assert_allclose(z.x_train.mean(axis=(0, 1)), 0, atol=1e-5)
    np.testing.assert_allclose(z.x_train.std(axis=(0, 1)), 1, atol=1e-4)
    expected = (client.x_test - client.x_train.mean(axis=(0, 1))) / client.x_train.std(axis=(0, 1))
    np.testing.assert_allclose(z.x_test, expected, rtol=1e-4)


def test_unknown_client_id():
    with pytest.raises(ConfigError, match="client ids are 5, 9"):
        partition_by_subject(_dataset(), seed=1).client(3)


# --- the time-ordered split (the CA-AFP authors' protocol) ------------------------------------


@pytest.mark.parametrize(
    "n, expected_test",
    [(1, 0), (2, 1), (4, 1), (5, 1), (6, 2), (10, 2), (11, 3), (15, 3), (16, 4), (123, 25)],
)
def test_time_ordered_counts_are_the_last_fifth_rounded_up(n, expected_test):
    # n_train = floor(0.8 n) exactly (0.8 * 15 is 12.000000000000002 in floats: still 12)
    train, test = time_ordered_split(np.zeros(n, dtype=int), 0.2)
    assert len(test) == expected_test
    assert train.tolist() == list(range(n - expected_test))  # the first windows train
    assert test.tolist() == list(range(n - expected_test, n))  # the last ones test


def test_time_ordered_split_keeps_time_order_within_each_class():
    y = np.array([0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2])  # interleaved classes, one single window
    train, test = time_ordered_split(y, 0.2)
    assert test.tolist() == [8, 9]  # the last window of class 0 and of class 1
    assert 10 in train.tolist()  # a class with one window goes to training


def test_time_ordered_partition_ignores_the_seed_and_random_depends_on_it():
    a = partition_by_subject(_dataset(), seed=1, split="time-ordered")
    b = partition_by_subject(_dataset(), seed=2, split="time-ordered")
    assert all(np.array_equal(u.x_test, v.x_test) for u, v in zip(a.clients, b.clients))
    c = partition_by_subject(_dataset(), seed=1, split="random")
    d = partition_by_subject(_dataset(), seed=2, split="random")
    assert not all(np.array_equal(u.x_test, v.x_test) for u, v in zip(c.clients, d.clients))


def test_wisdm_small_clients_are_left_out_in_the_time_ordered_protocol_only():
    rng = np.random.default_rng(0)
    counts = {3: 9, 4: 10, 7: 30}  # windows per user
    subject = np.concatenate([np.full(n, s) for s, n in counts.items()])
    data = WindowedDataset(
        name="wisdm",
        x=rng.normal(size=(len(subject), 4, 3)).astype(np.float32),
        y=np.arange(len(subject)) % 2,
        subject=subject,
        class_names=("a", "b"),
        channel_names=("x", "y", "z"),
    )
    kept = partition_by_subject(data, 0, split="time-ordered")
    assert [c.client_id for c in kept.clients] == [4, 7]  # user 3 has 9 < 10 windows
    assert [c.client_id for c in partition_by_subject(data, 0, split="random").clients] == [
        3,
        4,
        7,
    ]


def test_unknown_split_is_one_clear_error():
    with pytest.raises(ConfigError, match="unknown split 'shuffled'"):
        partition_by_subject(_dataset(), seed=0, split="shuffled")
