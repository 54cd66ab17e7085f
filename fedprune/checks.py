"""Parameter checks shared by every configuration and the command line.

Each check raises :class:`~fedprune.errors.ConfigError` with one line that names the option
as the user typed it (``--lr``) and the allowed range, before any data is loaded or any
directory is made. Non-finite numbers (``nan``, ``inf``) are never in range: ``nan`` compares
false with everything, so every check tests finiteness first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from fedprune.errors import ConfigError


def option(name: str) -> str:
    """``learning_rate`` -> ``--learning-rate`` (the spelling of the command line)."""
    return "--" + name.replace("_", "-")


def check_finite(name: str, value: float) -> float:
    """``value`` is a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{option(name)} must be a finite number, got {value!r}")
    return value


def check_range(
    name: str,
    value: float,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """``value`` is finite and in the interval (``*_open``: the bound itself is excluded)."""
    check_finite(name, value)
    below = low is not None and (value <= low if low_open else value < low)
    above = high is not None and (value >= high if high_open else value > high)
    if below or above:
        left = "-inf" if low is None else f"{low:g}"
        right = "inf" if high is None else f"{high:g}"
        interval = f"{'(' if low_open or low is None else '['}{left}, {right}"
        interval += ")" if high_open or high is None else "]"
        raise ConfigError(f"{option(name)} must be in {interval}, got {value!r}")
    return value


def check_positive(name: str, value: float) -> float:
    """``value`` > 0 (finite)."""
    return check_range(name, value, 0, low_open=True)


def check_nonnegative(name: str, value: float) -> float:
    """``value`` >= 0 (finite)."""
    return check_range(name, value, 0)


def check_count(name: str, value: int, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (rounds, epochs, clients, batch size, ...)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{option(name)} must be an integer >= {minimum}, got {value!r}")
    return value


def check_at_most(name: str, value: int, limit: int, what: str) -> int:
    """A count that the data bounds (e.g. clusters <= clients), checked right after loading."""
    if value > limit:
        raise ConfigError(f"{option(name)} must be at most {limit} ({what}), got {value}")
    return value


def check_seed(value: int) -> int:
    """A seed numpy and TensorFlow both accept: an integer in [0, 2**31 - 1]."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31:
        raise ConfigError(f"--seed must be an integer in [0, 2147483647], got {value!r}")
    return value


def check_choice(name: str, value: str, choices: Iterable[str]) -> str:
    """``value`` is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        raise ConfigError(f"{option(name)} must be one of {', '.join(choices)}, got {value!r}")
    return value
