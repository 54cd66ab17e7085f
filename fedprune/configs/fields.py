"""Configuration fields that carry their command-line description, and the checked base class.

A field made by :func:`param` holds, in its ``metadata``: ``help`` (the text of ``--help``),
``flag`` (the option name where it differs from the field name: ``learning_rate`` is
``--lr``), ``rule`` (a :class:`~fedprune.checks.Rule`: checked in ``__post_init__`` and shown
in ``--help``), ``parse`` (how the command line's text becomes the value, for tuples such as
``--phases 0,0,50``), ``metavar`` and ``default_text`` (what an unset ``None`` means).
:mod:`fedprune.configs.command_line` builds the options from this; nothing else restates it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from typing import Any

from fedprune.checks import Rule, check_fields


def param(
    default: object = dataclasses.MISSING,
    *,
    help: str,  # noqa: A002 (argparse's word)
    flag: str | None = None,
    rule: Rule | None = None,
    parse: Callable[[str], object] | None = None,
    metavar: str | None = None,
    default_text: str | None = None,
    cli: bool = True,
    group: str | None = None,
) -> Any:  # noqa: ANN401 (a dataclass field stands for any value)
    """A dataclass field with its command-line description; ``cli=False``: no option.
    ``group``: its heading in ``--help`` where the field's name alone does not tell
    (:data:`fedprune.configs.command_line.GROUP_OF`)."""
    metadata = dict(
        help=help,
        flag=flag,
        rule=rule,
        parse=parse,
        metavar=metavar,
        default_text=default_text,
        cli=cli,
        group=group,
    )
    return dataclasses.field(default=default, metadata=metadata)


def flag_of(field: dataclasses.Field) -> str:
    """The field's option name without dashes, in field spelling (``lr``, ``clients``)."""
    return field.metadata.get("flag") or field.name


def _number_tuple(kind: type, words: str, length: int | None) -> Callable[[str], tuple]:
    def parse(text: str) -> tuple:
        try:
            values = tuple(kind(v) for v in text.split(","))
        except ValueError:
            raise ValueError(f"expected comma-separated {words}, got {text!r}") from None
        if length is not None and len(values) != length:
            raise ValueError(f"expected {length} values, got {text!r}")
        return values

    return parse


def int_tuple(length: int | None = None) -> Callable[[str], tuple[int, ...]]:
    """Parser of comma-separated integers (``3,25``); ``length``: exactly that many."""
    return _number_tuple(int, "integers", length)


def float_tuple(length: int | None = None) -> Callable[[str], tuple[float, ...]]:
    """Parser of comma-separated numbers (``0.4,0.3``); ``length``: exactly that many."""
    return _number_tuple(float, "numbers", length)


def name_tuple(text: str) -> tuple[str, ...]:
    """Parser of comma-separated names (``conv1, dense``); whether they exist is the rule's."""
    return tuple(n.strip() for n in text.split(",") if n.strip())


class Config:
    """Base of the frozen configuration dataclasses: ``__post_init__`` checks every field by
    its rule (one :class:`~fedprune.errors.ConfigError` line naming the option), then
    :meth:`check` does the checks that involve several fields."""

    def __post_init__(self) -> None:
        unused = self.unused_fields()
        check_fields(
            (flag_of(f), getattr(self, f.name), f.metadata["rule"])
            for f in dataclasses.fields(self)
            if f.metadata.get("rule") is not None and f.name not in unused
        )
        self.check()

    def unused_fields(self) -> frozenset[str]:
        """Fields this configuration does not use (so their rules are not applied), e.g.
        FedCRef's ``dirtiness`` with ``--init kmeans-ae``."""
        return frozenset()

    def recorded(self) -> dict:
        """What ``config.json`` records; a run resumes only with an equal dict."""
        return dataclasses.asdict(self)

    def record_in(self, out: str | os.PathLike) -> dict:
        """What ``config.json`` of this configuration's run in the directory ``out`` holds:
        a run there resumes (or is finished) only where the file equals it. Configurations
        whose record depends on the directory (the HAR protocol) override it."""
        return self.recorded()

    def check(self) -> None:
        """Checks across fields; subclasses extend it (the fields' own rules have passed)."""

    def _set(self, name: str, value: object) -> None:
        """Normalize a field in ``__post_init__`` (the dataclass is frozen)."""
        object.__setattr__(self, name, value)


def cli_fields(config_class: type) -> Iterator[dataclasses.Field]:
    """The fields of ``config_class`` that are command-line options, in field order."""
    return (f for f in dataclasses.fields(config_class) if f.metadata.get("cli", False))
