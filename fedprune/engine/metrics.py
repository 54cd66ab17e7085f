"""Evaluation metrics of the CA-AFP paper (Section 4.4): accuracy and fairness.

Communication is in :mod:`fedprune.algorithms.caafp.communication`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def accuracy(y_true: np.ndarray, probabilities: np.ndarray) -> float:
    """Fraction of windows whose arg-max class equals the label."""
    if len(y_true) == 0:
        raise ValueError("accuracy of an empty test set is undefined")
    return float(np.mean(np.argmax(probabilities, axis=-1) == y_true))


def fairness(client_acc: Mapping[int, float] | np.ndarray) -> float:
    """Population standard deviation of per-client test accuracy (the paper's "fairness").

    Computed on fractions, so the result is a fraction in [0, 0.5]; lower is fairer.
    """
    values = np.asarray(
        list(client_acc.values()) if isinstance(client_acc, Mapping) else client_acc,
        dtype=np.float64,
    )
    return float(values.std())


def noise_summary(noisy: Sequence[int], client_acc: Mapping[int, float]) -> dict:
    """The noisy clients (``--label-noise``) and the mean accuracy of the noisy and of the
    clean clients (``None`` when there is none)."""
    affected = [a for c, a in client_acc.items() if c in noisy]
    clean = [a for c, a in client_acc.items() if c not in noisy]
    return {
        "clients": sorted(int(c) for c in noisy),
        "noisy_acc": float(np.mean(affected)) if affected else None,
        "clean_acc": float(np.mean(clean)) if clean else None,
    }
