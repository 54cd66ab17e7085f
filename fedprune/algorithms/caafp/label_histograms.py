"""The label-histogram clustering signal (``--cluster-signal labels``): each client's share of
training windows per class.

What a client reveals: its class proportions (C numbers summing to 1, C the number of
classes), not how many windows it holds and nothing about the windows themselves. The upload
is C float32 values (4 C bytes) instead of the one-epoch model update of Eq. 3 (4 bytes per
parameter, and the download of the model it starts from); nothing is trained for it.

The histograms are clustered exactly as the updates are: cosine distances (Eq. 4 applied to
the histograms), average linkage, and for ``--clusters auto`` the silhouette rule of
:mod:`~fedprune.algorithms.caafp.choose_k`. Interpretation: cosine, not Euclidean, distance,
so both signals share one code path; on histograms it is 0 for clients with the same
proportions and 1 for clients that share no class, whatever the number of classes each has.
The labels are those a client trains on (after ``--label-noise`` relabelled some of them).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def label_histograms(labels: Sequence[np.ndarray], num_classes: int) -> np.ndarray:
    """(clients, ``num_classes``) float64 rows: client k's windows per class over its windows,
    one row per entry of ``labels`` (each client's training labels, integers in
    [0, ``num_classes``)).

    >>> label_histograms([np.array([0, 0, 1, 2]), np.array([2])], 3).tolist()
    [[0.5, 0.25, 0.25], [0.0, 0.0, 1.0]]
    """
    rows = []
    for k, y in enumerate(labels):
        y = np.asarray(y)
        if y.size == 0:
            raise ValueError(f"client {k} has no training windows; its label histogram is empty")
        if y.dtype.kind not in "iu" or y.min() < 0 or y.max() >= num_classes:
            raise ValueError(f"client {k}'s labels must be integers in [0, {num_classes})")
        counts = np.bincount(y.ravel(), minlength=num_classes).astype(np.float64)
        rows.append(counts / counts.sum())
    return np.stack(rows)
