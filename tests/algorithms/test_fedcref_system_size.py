"""Whether FedCRef's simulated system fits its dataset, decided before anything is drawn
(fast: numbers only)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from fedprune.algorithms.fedcref.system_size import (
    can_draw,
    check_fits,
    holders_per_class,
    max_clients,
    max_samples_per_class,
    total_at_most,
)
from fedprune.errors import ConfigError

MNIST_TRAIN = np.array([5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949])


def mnist_fixture(tmp: Path, finished: Path) -> None:
    """``tmp/images/mnist``: the pattern images of ``test_fedcref_run`` in MNIST's files (6
    classes of 40 images); a ``prepare`` of ``tests/test_bad_input.py``."""
    from fedprune.data import images
    from tests.algorithms.test_fedcref_run import pattern_images
    from tests.data.test_images import write_idx_pair

    write_idx_pair(tmp / "images" / "mnist", images.file_names("mnist", "train"), *pattern_images())


def test_holders_per_class_follows_the_partition_split():
    sizes = np.array([100, 50, 7])
    np.testing.assert_array_equal(holders_per_class(sizes, 10, 0.0), [10, 5, 0])
    # overlap 0.3 of S = 10: a pool of 3 shared images, then 7 own ones per holder
    np.testing.assert_array_equal(holders_per_class(sizes, 10, 0.3), [13, 6, 0])
    # everything shared: any number of holders, but only where the class has S images
    everyone = holders_per_class(sizes, 10, 1.0)
    assert everyone[0] > 10**9 and everyone[1] > 10**9 and everyone[2] == 0


def test_three_classes_of_three_holders_serve_four_clients():
    """K_G = 3, so every client holds 2 classes; 30 images of S = 10 serve 3 holders each.
    9 holdings serve 4 clients (8) but not 5 (10); with 4, a draw fits when every class is
    left out by some client: 36 of the 81 draws."""
    sizes = np.array([30, 30, 30])
    assert can_draw(sizes, 4, 10, 0.0, max_classes=2)
    assert not can_draw(sizes, 5, 10, 0.0, max_classes=2)
    assert max_clients(sizes, 10, 0.0, max_classes=2) == 4
    # 4 clients need 8 holdings: 3 per class at most 10 images each (S = 11 gives 2)
    assert max_samples_per_class(sizes, 4, 0.0, max_classes=2) == 10


def test_the_total_bound_is_never_below_the_exact_probability():
    for n, top in itertools.product(range(1, 7), range(2, 6)):
        exact = np.array([1.0])
        for _ in range(n):  # distribution of K_1 + ... + K_n - 2 n, K uniform in [2, top]
            exact = np.convolve(exact, np.full(top - 1, 1 / (top - 1)))
        cdf = np.cumsum(exact)
        for limit in range(2 * n - 1, top * n + 1):
            truth = cdf[limit - 2 * n] if limit >= 2 * n else 0.0
            assert total_at_most(limit, n, top) >= truth - 1e-9, (n, top, limit)
    assert total_at_most(4, 2, 3) < 0.6  # P = 1/4: the bound is not trivial
    assert total_at_most(10, 2, 5) == 1.0  # at or above the mean


def test_mnist_maxima():
    # the paper's system fits; 100,000 clients do not (no draw of even 2 classes each fits
    # above 56, and the clients' classes in total make more than 45 improbable)
    assert can_draw(MNIST_TRAIN, 25, 500, 0.0, 5)
    assert max_clients(MNIST_TRAIN, 500, 0.0, 5) == 45
    assert max_samples_per_class(MNIST_TRAIN, 25, 0.0, 5) == 987


def test_mnist_draws_below_the_maxima_can_fit_and_above_never_do():
    """The refusal is a bound: Monte Carlo draws of partition_clients' kind (K_i uniform
    in [2, 5], then K_i classes of 10) fit sometimes where the maxima allow, never above."""
    rng = np.random.default_rng(0)

    def fits(num_clients: int, samples_per_class: int, draws: int = 4000) -> float:
        cap = holders_per_class(MNIST_TRAIN, samples_per_class, 0.0)
        k = rng.integers(2, 6, size=(draws, num_clients))
        rank = rng.random((draws, num_clients, 10)).argsort(axis=2).argsort(axis=2)
        held = (rank < k[..., None]).sum(axis=1)
        return float((held <= cap).all(axis=1).mean())

    assert fits(30, 500) > 0
    assert fits(46, 500) == 0 and not can_draw(MNIST_TRAIN, 46, 500, 0.0, 5)
    assert fits(25, 600) > 0
    assert fits(25, 988) == 0 and not can_draw(MNIST_TRAIN, 25, 988, 0.0, 5)


def test_check_fits_is_one_line_with_the_maxima():
    check_fits(MNIST_TRAIN, 25, 500, 0.0, None, "mnist (train)")
    with pytest.raises(ConfigError) as err:
        check_fits(MNIST_TRAIN, 100_000, 500, 0.0, None, "mnist (train)")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("--clients 100000 with --samples-per-class 500 needs more images")
    assert "mnist (train) has (10 classes of 5421 to 6742 images" in message
    assert "at most 45 clients fit at --samples-per-class 500" in message
    assert "samples per class for 100000 clients" not in message  # none would
    with pytest.raises(ConfigError, match="not even 2 clients fit at --samples-per-class 7000"):
        check_fits(MNIST_TRAIN, 25, 7000, 0.0, None, "mnist (train)")
    with pytest.raises(ConfigError, match="or at most 987 samples per class for 25 clients"):
        check_fits(MNIST_TRAIN, 25, 7000, 0.0, None, "mnist (train)")
    # a bad --max-classes is the partition's to refuse (before it draws)
    check_fits(MNIST_TRAIN, 100_000, 500, 0.0, 12, "mnist (train)")
