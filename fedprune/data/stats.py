"""Heterogeneity of the natural partition: the figures of Table 1 of the CA-AFP paper.

* Quantity skew: windows per client, mean ± population std, and CV = std / mean.
* Label skew: clients lacking at least one class; missing rate = those clients / all clients
  (17 / 36 = 47.2 % in the paper, so the rate counts clients, not client-class pairs).
* Feature skew: the paper names a "mean inter-client CV" without defining it. We use the
  inter-client CV (population std / mean over clients) of each client's mean accelerometer
  magnitude sqrt(x² + y² + z²) over all its windows, using the total-acceleration channels
  (UCI-HAR ``total_acc_*``, WISDM ``acc_*``). The magnitude does not depend on how the phone
  is held, so the CV reflects how differently people move. Per-channel CVs of raw channel
  means are not usable: body-acceleration and gyroscope channels have means near zero.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fedprune.data.partition import SPLITS, partition_by_subject
from fedprune.data.windows import WindowedDataset


@dataclasses.dataclass(frozen=True)
class Heterogeneity:
    """Table 1 figures of one dataset (fractions, not percents)."""

    dataset: str
    num_clients: int
    windows_mean: float
    windows_std: float
    quantity_cv: float
    clients_missing_classes: int
    missing_rate: float
    feature_cv: float

    def rows(self) -> list[tuple[str, str]]:
        """(metric, value) rows formatted like the paper's table."""
        return [
            ("Quantity skew: CV of windows per client", f"{100 * self.quantity_cv:.1f}%"),
            (
                "Quantity skew: windows per client (mean ± std)",
                f"{self.windows_mean:.0f} ± {self.windows_std:.0f}",
            ),
            (
                "Label skew: clients with missing classes",
                f"{self.clients_missing_classes} / {self.num_clients}",
            ),
            ("Label skew: missing rate", f"{100 * self.missing_rate:.1f}%"),
            ("Feature skew: mean inter-client CV", f"{100 * self.feature_cv:.1f}%"),
        ]


def accelerometer_channels(channel_names: tuple[str, ...]) -> list[int]:
    """Indices of the total-acceleration x, y, z channels."""
    idx = [i for i, c in enumerate(channel_names) if c.startswith(("total_acc", "acc_"))]
    if len(idx) != 3:
        raise ValueError(f"no accelerometer x/y/z channels among {channel_names}")
    return idx


def coefficient_of_variation(values: np.ndarray) -> float:
    """Population std / mean."""
    values = np.asarray(values, dtype=np.float64)
    return float(values.std() / values.mean())


def heterogeneity(data: WindowedDataset) -> Heterogeneity:
    """Compute the Table 1 figures for ``data``; see the module docstring for definitions."""
    subjects = data.subjects
    counts = np.array([np.sum(data.subject == s) for s in subjects])
    missing = sum(len(np.unique(data.y[data.subject == s])) < data.num_classes for s in subjects)
    acc = accelerometer_channels(data.channel_names)
    magnitude = np.array(
        [np.linalg.norm(data.x[data.subject == s][..., acc], axis=-1).mean() for s in subjects]
    )
    return Heterogeneity(
        dataset=data.name,
        num_clients=len(subjects),
        windows_mean=float(counts.mean()),
        windows_std=float(counts.std()),
        quantity_cv=coefficient_of_variation(counts),
        clients_missing_classes=int(missing),
        missing_rate=missing / len(subjects),
        feature_cv=coefficient_of_variation(magnitude),
    )


@dataclasses.dataclass(frozen=True)
class SplitCounts:
    """What a per-client split keeps: clients, and training and test windows."""

    split: str
    clients: int
    clients_left_out: int
    train_windows: int
    test_windows: int

    def row(self) -> tuple[str, str]:
        left = f", {self.clients_left_out} left out" if self.clients_left_out else ""
        return (
            f"Split {self.split}",
            f"{self.clients} clients{left}; {self.train_windows} train / "
            f"{self.test_windows} test windows",
        )


def split_counts(data: WindowedDataset, seed: int = 0) -> list[SplitCounts]:
    """:class:`SplitCounts` of every split of :mod:`fedprune.data.partition` (seed ``seed``)."""
    out = []
    for split in SPLITS:
        fed = partition_by_subject(data, seed, split=split)
        out.append(
            SplitCounts(
                split,
                fed.num_clients,
                len(data.subjects) - fed.num_clients,
                sum(len(c.y_train) for c in fed.clients),
                sum(len(c.y_test) for c in fed.clients),
            )
        )
    return out
