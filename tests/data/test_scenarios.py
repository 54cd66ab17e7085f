"""Scenario injectors (fedprune.data.scenarios): counts, determinism, the same clients at a
seed, untouched parts untouched, and every bad input."""

import numpy as np
import pytest

from fedprune.data.partition import ClientData, FederatedData, standardize
from fedprune.data.scenarios import inject_label_noise, keep_classes_per_client, noisy_clients
from fedprune.errors import ConfigError


def _data(clients: int = 10, per_class: int = 5, classes: int = 6) -> FederatedData:
    rng = np.random.default_rng(0)
    out = []
    for cid in range(1, clients + 1):
        y = np.repeat(np.arange(classes), per_class)
        out.append(
            ClientData(
                cid,
                rng.normal(size=(len(y), 4, 3)).astype(np.float32),
                y.copy(),
                rng.normal(size=(classes, 4, 3)).astype(np.float32),
                np.arange(classes),
            )
        )
    return FederatedData("toy", tuple(out), tuple("abcdef"[:classes]), (4, 3))


def test_label_noise_counts_and_untouched_parts():
    data = _data()
    noisy, affected = inject_label_noise(data, 0.4, 0.3, seed=1)
    assert len(affected) == 4  # round(0.4 * 10)
    for before, after in zip(data.clients, noisy.clients):
        assert np.array_equal(before.x_train, after.x_train)  # features untouched
        assert np.array_equal(before.y_test, after.y_test)  # test labels untouched
        if before.client_id not in affected:
            assert np.array_equal(before.y_train, after.y_train)
        else:
            changed = np.flatnonzero(before.y_train != after.y_train)
            assert len(changed) <= 9  # round(0.3 * 30) windows redrawn (some keep their label)
            assert after.y_train.min() >= 0 and after.y_train.max() < 6


def test_drift_redraws_every_training_label_of_the_affected_clients():
    data = _data(per_class=50)  # 300 windows: uniform redraws keep about 1/6 of the labels
    noisy, affected = inject_label_noise(data, 0.4, 1.0, seed=3)
    client = affected[0]
    before, after = data.client(client).y_train, noisy.client(client).y_train
    assert 0.70 < np.mean(before != after) < 0.95  # 5/6 expected
    assert set(np.unique(after)) == set(range(6))


def test_the_same_clients_for_every_noise_level_and_deterministic():
    data = _data()
    _, a = inject_label_noise(data, 0.4, 0.3, seed=7)
    _, b = inject_label_noise(data, 0.4, 1.0, seed=7)
    assert a == b == noisy_clients(list(range(1, 11)), 0.4, seed=7)
    x, _ = inject_label_noise(data, 0.4, 0.3, seed=7)
    y, _ = inject_label_noise(data, 0.4, 0.3, seed=7)
    assert all(np.array_equal(u.y_train, v.y_train) for u, v in zip(x.clients, y.clients))


def test_classes_per_client_keeps_k_eligible_classes_in_both_splits():
    data = _data()
    kept = keep_classes_per_client(data, 2, seed=0)
    for client in kept.clients:
        classes = np.unique(client.y_train)
        assert len(classes) == 2 and np.array_equal(classes, np.unique(client.y_test))
        assert len(client.y_train) == 2 * 5 and len(client.x_train) == 10
    again = keep_classes_per_client(data, 2, seed=0)
    assert all(np.array_equal(u.y_test, v.y_test) for u, v in zip(kept.clients, again.clients))


def test_a_class_missing_from_the_test_split_is_not_eligible():
    data = _data(clients=1)
    client = data.clients[0]
    only_two = ClientData(1, client.x_train, client.y_train, client.x_test[:2], client.y_test[:2])
    kept = keep_classes_per_client(
        FederatedData("toy", (only_two,), data.class_names, (4, 3)), 5, 0
    )
    assert np.unique(kept.clients[0].y_train).tolist() == [0, 1]  # min(k, m) with m = 2


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda d: inject_label_noise(d, 0.0, 0.3, 0),
            r"--label-noise: fractions must be in \(0, 1\]",
        ),
        (
            lambda d: inject_label_noise(d, 0.4, 1.5, 0),
            r"--label-noise: fractions must be in \(0, 1\]",
        ),
        (lambda d: inject_label_noise(d, float("nan"), 0.3, 0), "fractions must be in"),
        (lambda d: inject_label_noise(d, 0.01, 0.3, 0), "selects 0 of 10 clients"),
        (lambda d: inject_label_noise(d, 0.4, 0.01, 0), "selects 0 of client"),
        (lambda d: keep_classes_per_client(d, 0, 0), r"must be an integer in \[1, 5\], got 0"),
        (lambda d: keep_classes_per_client(d, 6, 0), r"must be an integer in \[1, 5\], got 6"),
    ],
)
def test_bad_input_is_one_clear_error(call, message):
    with pytest.raises(ConfigError, match=message):
        call(_data())


def test_a_client_without_an_eligible_class_is_named():
    data = _data(clients=2)
    lonely = ClientData(
        2,
        data.clients[1].x_train,
        np.zeros(30, np.int64),
        data.clients[1].x_test,
        np.ones(6, np.int64),
    )
    bad = FederatedData("toy", (data.clients[0], lonely), data.class_names, (4, 3))
    with pytest.raises(ConfigError, match="client 2 has no class in both"):
        keep_classes_per_client(bad, 2, 0)


def test_injectors_refuse_standardized_data():
    data = _data(clients=1)
    standardized = FederatedData("toy", (standardize(data.clients[0]),), data.class_names, (4, 3))
    with pytest.raises(ValueError, match="before standardization"):
        inject_label_noise(standardized, 1.0, 0.3, 0)
