import numpy as np
import pytest

from fedprune.data.partition import partition_by_subject, standardize, stratified_split
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
