"""Confidence intervals of a mean over seeds, and where a mean falls against a paper's.

The papers report "mean (± 95 % CI) over five runs"; our tables give the same for our seeds
(Student's t interval of the mean, the usual reading of a CI over a handful of runs) and say
where ours falls: ``in`` (our mean inside the paper's interval), ``overlap`` (outside it, but
the two intervals overlap), else ``above`` or ``below``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

LEVEL = 0.95


def mean_ci(values: Sequence[float], level: float = LEVEL) -> tuple[float, float | None]:
    """The mean of ``values`` and the half-width of its Student's t interval at ``level``
    (``t_{(1+level)/2, n-1} s / sqrt(n)``, s the sample std); ``None`` for one value."""
    if len(values) == 0:
        raise ValueError("a mean of no values")
    array = np.asarray(values, dtype=np.float64)
    mean = float(array.mean())
    if len(array) < 2:
        return mean, None
    sem = float(array.std(ddof=1)) / np.sqrt(len(array))
    return mean, float(stats.t.ppf((1 + level) / 2, len(array) - 1) * sem)


def against(
    mean: float, half_width: float | None, paper_mean: float, paper_half_width: float
) -> str:
    """Where ``mean`` (± ``half_width``, ``None`` for one seed: a point) falls against the
    paper's ``paper_mean`` ± ``paper_half_width``: ``in``, ``overlap``, ``above`` or
    ``below`` (module docstring)."""
    low, high = paper_mean - paper_half_width, paper_mean + paper_half_width
    if low <= mean <= high:
        return "in"
    ours = half_width or 0.0
    if mean - ours <= high and mean + ours >= low:
        return "overlap"
    return "above" if mean > high else "below"
