"""Scenario injectors for CA-AFP's robustness studies (paper §5.1): pure functions
on the federated data, applied after the per-client split and before standardization.

* :func:`inject_label_noise` (``--label-noise C,L``): ``round(C N)`` of the N clients, drawn
  by a generator seeded with ``(seed, NOISE_TAG)``, so that every method, score-weight triple
  and noise level L sees the same clients at a seed; in each, ``round(L n)`` of its n
  *training* windows, drawn per ``(seed, NOISE_TAG, client)``, get a label drawn uniformly
  over all classes (it may equal the old one, as the paper's U(0, 5) does). Features, test
  labels and the other clients are untouched. The paper's Noisy is ``0.4, 0.3`` and Drift
  ``0.4, 1.0``.
* :func:`keep_classes_per_client` (``--classes-per-client k``): per client, ``min(k, m)`` of
  its m *eligible* classes (present in both its training and test windows), drawn per
  ``(seed, CLASSES_TAG, client)``; its other windows are dropped from both splits.

Interpretations: ``round`` rounds half up (``floor(x + 0.5)``), as the random split does;
"uniform over all classes" is over the dataset's classes, not only those the client has.
Bad parameters are one :class:`~fedprune.errors.ConfigError` line naming the option.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from fedprune.data.partition import ClientData, FederatedData
from fedprune.errors import ConfigError

NOISE_TAG = 4242  # fixed: the affected clients depend on the seed only
CLASSES_TAG = 4343


def _round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


def _check_fraction(option: str, value: float) -> None:
    if not (math.isfinite(value) and 0.0 < value <= 1.0):
        raise ConfigError(f"{option}: fractions must be in (0, 1], got {value}")


def _check_unstandardized(data: FederatedData) -> None:
    if any(c.mean is not None for c in data.clients):
        raise ValueError("scenario injectors apply before standardization")


def noisy_clients(client_ids: list[int], fraction: float, seed: int) -> list[int]:
    """The ``round(fraction N)`` affected clients (sorted), the same for every noise level."""
    _check_fraction("--label-noise", fraction)
    count = _round_half_up(fraction * len(client_ids))
    if count == 0:
        raise ConfigError(
            f"--label-noise: a client fraction of {fraction} selects 0 of {len(client_ids)} "
            "clients; give a larger fraction"
        )
    rng = np.random.default_rng([seed, NOISE_TAG])
    return sorted(int(i) for i in rng.choice(sorted(client_ids), size=count, replace=False))


def inject_label_noise(
    data: FederatedData, clients_fraction: float, windows_fraction: float, seed: int
) -> tuple[FederatedData, list[int]]:
    """(data with noisy training labels, the affected client ids); see the module text."""
    _check_unstandardized(data)
    _check_fraction("--label-noise", windows_fraction)
    affected = noisy_clients([c.client_id for c in data.clients], clients_fraction, seed)
    clients = []
    for client in data.clients:
        if client.client_id not in affected:
            clients.append(client)
            continue
        n = len(client.y_train)
        count = _round_half_up(windows_fraction * n)
        if count == 0:
            raise ConfigError(
                f"--label-noise: a window fraction of {windows_fraction} selects 0 of client "
                f"{client.client_id}'s {n} training windows; give a larger fraction"
            )
        rng = np.random.default_rng([seed, NOISE_TAG, client.client_id])
        rows = rng.choice(n, size=count, replace=False)
        labels = client.y_train.copy()
        labels[rows] = rng.integers(0, data.num_classes, size=count)
        clients.append(dataclasses.replace(client, y_train=labels))
    return dataclasses.replace(data, clients=tuple(clients)), affected


def keep_classes_per_client(data: FederatedData, k: int, seed: int) -> FederatedData:
    """Each client keeps ``min(k, m)`` of its m eligible classes; see the module text."""
    _check_unstandardized(data)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= data.num_classes - 1:
        raise ConfigError(
            f"--classes-per-client must be an integer in [1, {data.num_classes - 1}], got {k}"
        )
    clients = []
    for client in data.clients:
        eligible = np.intersect1d(np.unique(client.y_train), np.unique(client.y_test))
        if len(eligible) == 0:
            raise ConfigError(
                f"--classes-per-client: client {client.client_id} has no class in both its "
                "training and test windows; leave the option out for this dataset"
            )
        rng = np.random.default_rng([seed, CLASSES_TAG, client.client_id])
        kept = np.sort(rng.choice(eligible, size=min(k, len(eligible)), replace=False))
        train = np.isin(client.y_train, kept)
        test = np.isin(client.y_test, kept)
        clients.append(_keep(client, train, test))
    return dataclasses.replace(data, clients=tuple(clients))


def _keep(client: ClientData, train: np.ndarray, test: np.ndarray) -> ClientData:
    return dataclasses.replace(
        client,
        x_train=client.x_train[train],
        y_train=client.y_train[train],
        x_test=client.x_test[test],
        y_test=client.y_test[test],
    )
