"""Parameter checks shared by every configuration and the command line.

The ``check_*`` functions check one value; a :class:`Rule` (``count()``, ``interval()``,
``POSITIVE``, ``SEED``, ``one_of()``, ``optional()``, ``each()``) pairs such a check with its
text for ``--help``. The configurations (:mod:`fedprune.configs`) attach a rule to each field
and run them all in ``__post_init__`` with :func:`check_fields`, so the library and the
command line refuse the same things with the same line, and ``--help`` shows the same range.

Each check raises :class:`~fedprune.errors.ConfigError` with one line that names the option
as the user typed it (``--lr``) and the allowed range, before any data is loaded or any
directory is made. Non-finite numbers (``nan``, ``inf``) are never in range: ``nan`` compares
false with everything, so every check tests finiteness first. A count (rounds, epochs,
clients, batch size, clusters, ...) is an integer of at most :data:`MAX_COUNT`
(2,147,483,647, the largest 32-bit integer, as for ``--seed``), so that no count overflows
where numpy or TensorFlow store it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from fedprune.errors import ConfigError

MAX_COUNT = 2**31 - 1
"""The largest count any option takes (see the module text)."""


USER_SUFFIX = ".npz"
"""A ``--dataset`` ending in this names your own file rather than a built-in dataset."""


def is_user_file(dataset: str) -> bool:
    """Whether ``--dataset`` names your own ``.npz`` file rather than a built-in dataset."""
    return dataset.endswith(USER_SUFFIX)


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
        text = _interval_text(low, high, low_open, high_open)
        raise ConfigError(f"{option(name)} must be in {text}, got {value!r}")
    return value


def _interval_text(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    """``[0, 1]``, ``(0, inf)``, ...: the interval as the messages and ``--help`` write it."""
    left = "-inf" if low is None else f"{low:g}"
    right = "inf" if high is None else f"{high:g}"
    text = f"{'(' if low_open or low is None else '['}{left}, {right}"
    return text + (")" if high_open or high is None else "]")


def check_positive(name: str, value: float) -> float:
    """``value`` > 0 (finite)."""
    return check_range(name, value, 0, low_open=True)


def check_nonnegative(name: str, value: float) -> float:
    """``value`` >= 0 (finite)."""
    return check_range(name, value, 0)


def check_count(name: str, value: int, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (rounds, epochs, clients, batch size, ...), and at most
    :data:`MAX_COUNT`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{option(name)} must be an integer >= {minimum}, got {value!r}")
    if value > MAX_COUNT:
        raise ConfigError(
            f"{option(name)} must be at most {MAX_COUNT} (the largest count fedprune takes), "
            f"got {value}"
        )
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


def check_host_port(target: object) -> tuple[str, int]:
    """A remote worker's ``HOST:PORT`` (``[IPv6]:PORT``) with a port in [1, 65535]: (host,
    port), else a ValueError saying what is wrong (the caller names the option)."""
    if not isinstance(target, str):
        raise ValueError(f"expected HOST:PORT, e.g. node2:8443, got {target!r}")
    host, sep, port = target.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isascii() or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, e.g. node2:8443, got {target!r}")
    if not 1 <= int(port) <= 65535:
        raise ValueError(f"the port must be in [1, 65535], got {target!r}")
    return host, int(port)


def check_choice(name: str, value: str, choices: Iterable[str]) -> str:
    """``value`` is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        raise ConfigError(f"{option(name)} must be one of {', '.join(choices)}, got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class Rule:
    """What one parameter may be: ``check(name, value)`` raises the one-line
    :class:`ConfigError` (naming ``--name``), ``text`` says the same in words for ``--help``,
    ``choices`` lists the allowed values of a choice (shown by argparse)."""

    check: Callable[[str, Any], object]
    text: str
    choices: tuple[str, ...] | None = None


def count(minimum: int = 1) -> Rule:
    """An integer >= ``minimum`` (:func:`check_count`)."""
    return Rule(lambda name, value: check_count(name, value, minimum), f"integer >= {minimum}")


def interval(
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> Rule:
    """A finite number in the interval (:func:`check_range`)."""

    def check(name: str, value: float) -> float:
        return check_range(name, value, low, high, low_open, high_open)

    return Rule(check, _interval_text(low, high, low_open, high_open))


POSITIVE = interval(0, low_open=True)
NONNEGATIVE = interval(0)
FRACTION = interval(0, 1)
SPARSITY = interval(0, 1, high_open=True)  # all weights pruned is not a model
SEED = Rule(lambda name, value: check_seed(value), "integer in [0, 2147483647]")


def one_of(choices: Iterable[str]) -> Rule:
    """One of ``choices`` (:func:`check_choice`)."""
    choices = tuple(choices)
    return Rule(lambda name, value: check_choice(name, value, choices), "", choices)


def optional(rule: Rule) -> Rule:
    """``None`` (meaning "the method decides") or a value ``rule`` allows."""

    def check(name: str, value: object) -> object:
        return value if value is None else rule.check(name, value)

    return Rule(check, rule.text, rule.choices)


def each(rule: Rule) -> Rule:
    """A non-empty tuple whose every value ``rule`` allows (e.g. ``--ft-epochs 3,25``)."""

    def check(name: str, values: tuple) -> tuple:
        if not values:
            raise ConfigError(f"{option(name)} needs at least one value")
        for value in values:
            rule.check(name, value)
        return values

    return Rule(check, f"each {rule.text}" if rule.text else "", rule.choices)


def check_fields(values: Iterable[tuple[str, object, Rule]]) -> None:
    """Check every ``(option name, value, rule)``; the first failure raises its one line."""
    for name, value, rule in values:
        rule.check(name, value)


def check_layer_names(names: Sequence[str], valid: Sequence[str]) -> None:
    """``--prune-layers``: ``names`` must be a non-empty selection of ``valid`` (the names of
    the layers with prunable kernels, :mod:`fedprune.sparsity.layers`)."""
    unknown = [n for n in names if n not in valid]
    if unknown or not names:
        given = ", ".join(unknown) if unknown else "none"
        raise ConfigError(
            f"--prune-layers: unknown or missing layer name ({given}); "
            f"the layers with prunable kernels are {', '.join(valid)}"
        )
