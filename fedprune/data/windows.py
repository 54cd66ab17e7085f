"""The in-memory form every dataset reader produces: labelled windows with their subject."""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class WindowedDataset:
    """Fixed-length sensor windows of one dataset, before any federated split.

    Attributes
    ----------
    name : dataset name (``"uci_har"``, ``"wisdm"``).
    x : float32 array (N, T, C): N windows of T time steps and C channels.
    y : int64 array (N,): class index in ``[0, len(class_names))``.
    subject : int64 array (N,): the subject/user who recorded the window (one client each).
    class_names : activity names, indexed by class.
    channel_names : channel names, indexed by channel.
    """

    name: str
    x: np.ndarray
    y: np.ndarray
    subject: np.ndarray
    class_names: tuple[str, ...]
    channel_names: tuple[str, ...]

    def __post_init__(self) -> None:
        n = len(self.x)
        if self.x.ndim != 3 or len(self.y) != n or len(self.subject) != n:
            raise ValueError(
                f"inconsistent shapes: x {self.x.shape}, y {self.y.shape}, "
                f"subject {self.subject.shape}"
            )
        if self.x.shape[2] != len(self.channel_names):
            raise ValueError(f"x has {self.x.shape[2]} channels, names {self.channel_names}")

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def subjects(self) -> np.ndarray:
        """Sorted distinct subject ids."""
        return np.unique(self.subject)
