"""The natural federated partition: one client per subject, a per-client, per-class split.

Two splits (``--split``):

* ``time-ordered`` (the default; the CA-AFP authors' protocol, the rule of their code): per
  client and per class, the windows in time order (the order of the official files: UCI-HAR by
  experiment and time, WISDM by timestamp within each user's activity runs), the first 80 % to
  training and the last 20 % to test. Interpretations: "first 80 %" is ``floor(0.8 n)``
  windows, computed exactly (``(1 - f) n`` rounded down with integers for ``f = 0.2``), so the
  test part is ``ceil(0.2 n)``; a class with fewer than 2 windows goes to training; a class
  with more than 5 windows always has a test window (implied by the rounding, checked). On
  WISDM, clients with fewer than 10 windows are left out (none of the 36 users of our copy
  has fewer than 105). Consecutive windows overlap by 50 %, so only the one window pair at
  each class's 80 % boundary shares samples across the split.
* ``random`` (for run directories that recorded it, and to measure the leak):
  per class with n windows, seeded, ``n_test = round(test_fraction * n)`` (half rounds up)
  but at least 1 when ``n >= 2`` and at most ``n - 1``; a class with a single window goes to
  train. Windows overlap by 50 %, so most test windows share half their samples with a
  training window: a leak that makes accuracies optimistic.

Optional standardization is per client and per channel, fitted on that client's training
windows only (the test windows never inform it).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fedprune.data.windows import WindowedDataset
from fedprune.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class ClientData:
    """One client's windows after the split. ``mean``/``std`` are set when standardized."""

    client_id: int
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    mean: np.ndarray | None = None
    std: np.ndarray | None = None

    @property
    def num_train(self) -> int:
        return len(self.y_train)


@dataclasses.dataclass(frozen=True)
class FederatedData:
    """All clients of a dataset, in ascending subject order."""

    name: str
    clients: tuple[ClientData, ...]
    class_names: tuple[str, ...]
    input_shape: tuple[int, ...]
    noisy_clients: tuple[int, ...] = ()  # whose training labels a scenario made noisy

    @property
    def num_clients(self) -> int:
        return len(self.clients)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def client(self, client_id: int) -> ClientData:
        for c in self.clients:
            if c.client_id == client_id:
                return c
        ids = ", ".join(str(c.client_id) for c in self.clients)
        raise ConfigError(f"{self.name} has no client {client_id}; client ids are {ids}")


def stratified_split(
    y: np.ndarray, test_fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (train, test) indices into ``y``, per class as in the module docstring."""
    if not 0.0 < test_fraction < 1.0:
        raise ConfigError(f"test fraction must be in (0, 1), got {test_fraction}")
    train, test = [], []
    for cls in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == cls))
        n = len(idx)
        n_test = 0 if n < 2 else min(max(int(np.floor(test_fraction * n + 0.5)), 1), n - 1)
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


SPLITS = ("time-ordered", "random")
# the authors' protocol leaves out small clients (time-ordered split only)
MIN_CLIENT_WINDOWS = {"wisdm": 10}


def time_ordered_split(y: np.ndarray, test_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (train, test) indices into ``y`` (rows in time order): per class, the first
    ``floor((1 - test_fraction) n)`` windows train, the rest test; see the module docstring."""
    if not 0.0 < test_fraction < 1.0:
        raise ConfigError(f"test fraction must be in (0, 1), got {test_fraction}")
    keep = 1.0 - test_fraction
    train, test = [], []
    for cls in np.unique(y):
        idx = np.flatnonzero(y == cls)
        n = len(idx)
        # exact for test_fraction = 0.2 (4n // 5); floor((1 - f) n) with a guard otherwise
        n_train = n if n < 2 else (4 * n // 5 if test_fraction == 0.2 else int(keep * n + 1e-9))
        if n > 5 and n_train == n:  # never happens at 0.2; the protocol's guarantee
            n_train = n - 1
        train.append(idx[:n_train])
        test.append(idx[n_train:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def standardize(client: ClientData, eps: float = 1e-6) -> ClientData:
    """Z-score every channel with the client's own training mean and std."""
    mean = client.x_train.mean(axis=(0, 1))
    std = client.x_train.std(axis=(0, 1))
    std = np.where(std < eps, 1.0, std)

    def z(x: np.ndarray) -> np.ndarray:
        return ((x - mean) / std).astype(np.float32)

    return dataclasses.replace(
        client,
        x_train=z(client.x_train),
        x_test=z(client.x_test),
        mean=mean.astype(np.float32),
        std=std.astype(np.float32),
    )


def standardize_all(data: FederatedData) -> FederatedData:
    """Every client :func:`standardize`-d with its own training statistics."""
    return dataclasses.replace(data, clients=tuple(standardize(c) for c in data.clients))


def partition_by_subject(
    data: WindowedDataset,
    seed: int,
    test_fraction: float = 0.2,
    standardize_clients: bool = False,
    split: str = "time-ordered",
) -> FederatedData:
    """One client per subject (client id = subject id), split by ``split``
    (:func:`time_ordered_split` or :func:`stratified_split`).

    A random split of each client uses its own generator seeded by ``(seed, client id)``, so
    adding or removing a client never changes the others' splits; the time-ordered split does
    not depend on the seed.
    """
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    minimum = MIN_CLIENT_WINDOWS.get(data.name, 0) if split == "time-ordered" else 0
    clients = []
    for subject in data.subjects:
        rows = np.flatnonzero(data.subject == subject)
        if len(rows) < minimum:
            continue
        if split == "time-ordered":
            tr, te = time_ordered_split(data.y[rows], test_fraction)
        else:
            rng = np.random.default_rng([seed, int(subject)])
            tr, te = stratified_split(data.y[rows], test_fraction, rng)
        client = ClientData(
            client_id=int(subject),
            x_train=data.x[rows[tr]],
            y_train=data.y[rows[tr]],
            x_test=data.x[rows[te]],
            y_test=data.y[rows[te]],
        )
        clients.append(standardize(client) if standardize_clients else client)
    return FederatedData(
        name=data.name,
        clients=tuple(clients),
        class_names=data.class_names,
        input_shape=tuple(data.x.shape[1:]),
    )
