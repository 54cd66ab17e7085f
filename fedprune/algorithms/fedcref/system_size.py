"""Whether the simulated system fits its dataset, decided from the class sizes alone.

:func:`fedprune.data.clustered_partition.partition_clients` draws every client's K_i
(uniform in ``[2, max_classes]``) and its classes, and redraws all of them (up to
``MAX_DRAWS`` times) until every class has enough images for its holders. Too many clients,
or too many samples per class, make every draw fail, and each draw costs time in proportion
to the clients (1,001 draws of 100,000 clients take about 18 minutes). :func:`check_fits`
decides it at once, from the class sizes, before anything is drawn.

A class of ``n_c`` images serves at most ``cap_c = (n_c - shared) // own`` holders
(``shared = round(O * S)`` images common to its holders, ``own = S - shared`` of each holder's
own). A configuration is refused when either holds:

* **no draw at all fits**: even with every client holding the fewest classes (2), the classes
  cannot serve N clients, i.e. ``sum_c min(cap_c, N) < 2 N`` (the condition for a 0-1 matrix
  with row sums 2 and column sums at most ``cap_c``);
* **no draw fits but with negligible probability**: a draw fits only if every class is
  within its ``cap_c``, so only if (a) each class is, and (b) the clients' classes in total
  are at most ``sum_c cap_c``. A client holds class c with probability ``E[K_i] / K_G``,
  independently of the others, so the holders of c are ``Binomial(N, E[K_i] / K_G)``; and
  ``P(K_1 + ... + K_N <= sum_c cap_c)`` is bounded by Chernoff's inequality
  (:func:`total_at_most`). The chance that one of the ``MAX_DRAWS + 1`` draws fits is thus at
  most ``(MAX_DRAWS + 1) * min(min_c P(holders_c <= cap_c), P(sum K_i <= sum_c cap_c))``;
  a system is refused when that is below ``NEGLIGIBLE``.

Both are upper bounds on what can be drawn, so nothing that could be drawn is refused; the
maximum the error names is the largest value both allow. Just below it the draws may still
fail (then ``partition_clients`` says which class ran short, after its draws).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.stats import binom

from fedprune.data.clustered_partition import MAX_DRAWS
from fedprune.errors import ConfigError

MIN_CLASSES = 2  # the fewest classes a client holds (the paper's 2 <= K_i)
NEGLIGIBLE = 1e-6  # a chance of any of the draws fitting below which the system is refused


def holders_per_class(
    class_sizes: np.ndarray, samples_per_class: int, overlap: float
) -> np.ndarray:
    """How many clients each class can serve (``partition_clients``' split of a class: a
    pool of ``round(O * S)`` shared images, then ``S - shared`` own images per holder); a
    very large number where holders share everything (``O = 1``)."""
    sizes = np.asarray(class_sizes, dtype=np.int64)
    shared = math.floor(overlap * samples_per_class + 0.5)
    own = samples_per_class - shared
    if own == 0:
        return np.where(sizes >= shared, np.iinfo(np.int64).max // 4, 0)
    return np.maximum((sizes - shared) // own, 0)


def can_draw(
    class_sizes: np.ndarray,
    num_clients: int,
    samples_per_class: int,
    overlap: float,
    max_classes: int,
) -> bool:
    """Whether a draw of ``num_clients`` clients with ``samples_per_class`` images per class
    can fit the classes (the conditions of the module text)."""
    cap = np.minimum(holders_per_class(class_sizes, samples_per_class, overlap), num_clients)
    if cap.sum() < MIN_CLASSES * num_clients:
        return False
    p = (MIN_CLASSES + max_classes) / 2 / len(cap)  # P(a client holds a given class)
    one_class = float(np.min(binom.cdf(cap, num_clients, p)))
    total = total_at_most(int(cap.sum()), num_clients, max_classes)
    return (MAX_DRAWS + 1) * min(one_class, total) >= NEGLIGIBLE


def total_at_most(limit: int, num_clients: int, max_classes: int) -> float:
    """An upper bound (Chernoff's) on P(K_1 + ... + K_N <= limit) for N independent K_i
    uniform in ``[2, max_classes]``: ``min over t >= 0 of exp(t limit) E[exp(-t K)]^N``."""
    k = np.arange(MIN_CLASSES, max_classes + 1, dtype=np.float64)
    if limit >= num_clients * k.mean():
        return 1.0

    def log_bound(t: float) -> float:
        shifted = float(np.log(np.mean(np.exp(-t * (k - k[0])))))  # log E[exp(-t (K - 2))]
        return t * limit + num_clients * (shifted - t * k[0])

    best = minimize_scalar(log_bound, bounds=(0.0, 50.0), method="bounded")
    return float(np.exp(min(best.fun, 0.0)))


def _largest(fits: Callable[[int], bool], low: int, high: int) -> int:
    """The largest v in [low, high] with ``fits(v)`` for a predicate true up to some value
    and false above it; ``low - 1`` if none."""
    if not fits(low):
        return low - 1
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fits(mid) else (low, mid - 1)
    return low


def max_clients(
    class_sizes: np.ndarray, samples_per_class: int, overlap: float, max_classes: int
) -> int:
    """The most clients that can be drawn (0 or 1 where not even 2 can)."""
    upper = int(np.sum(class_sizes)) // MIN_CLASSES + 1  # even with one image per holder
    return max(
        _largest(
            lambda n: can_draw(class_sizes, n, samples_per_class, overlap, max_classes), 1, upper
        ),
        0,
    )


def max_samples_per_class(
    class_sizes: np.ndarray, num_clients: int, overlap: float, max_classes: int
) -> int:
    """The most samples per class and client with which ``num_clients`` clients can be
    drawn (0 where none)."""
    return _largest(
        lambda s: can_draw(class_sizes, num_clients, s, overlap, max_classes),
        1,
        int(np.max(class_sizes)),
    )


def check_fits(
    class_sizes: np.ndarray,
    num_clients: int,
    samples_per_class: int,
    overlap: float,
    max_classes: int | None,
    data_name: str,
) -> None:
    """One :class:`ConfigError` line naming the largest ``--clients`` and
    ``--samples-per-class`` that fit, unless ``num_clients`` clients with
    ``samples_per_class`` images per class can be drawn from classes of ``class_sizes``
    images (``max_classes``: the largest K_i, default K_G // 2). Class counts the partition
    refuses on its own (K_G < 3, a bad ``max_classes``) are left to it: it checks them before
    drawing."""
    sizes = np.asarray(class_sizes, dtype=np.int64)
    top = len(sizes) // 2 if max_classes is None else max_classes
    if not MIN_CLASSES <= top <= len(sizes) - 1:
        return
    if can_draw(sizes, num_clients, samples_per_class, overlap, top):
        return
    most = max_clients(sizes, samples_per_class, overlap, top)
    per_class = max_samples_per_class(sizes, num_clients, overlap, top)
    fit = f"at most {most} clients fit" if most >= 2 else "not even 2 clients fit"
    other = (
        f", or at most {per_class} samples per class for {num_clients} clients"
        if per_class >= 1
        else ""
    )
    low, high = int(sizes.min()), int(sizes.max())
    each = f"{low}" if low == high else f"{low} to {high}"
    raise ConfigError(
        f"--clients {num_clients} with --samples-per-class {samples_per_class} needs more "
        f"images than {data_name} has ({len(sizes)} classes of {each} images, each client "
        f"drawing {MIN_CLASSES} to {top} of them): {fit} at "
        f"--samples-per-class {samples_per_class}{other}; lower --clients or "
        "--samples-per-class" + (" or raise --overlap" if overlap < 1 else "")
    )
