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
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from fedprune.checks import Rule, check_fields, option
from fedprune.errors import ConfigError, FedpruneError


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

    parse.length = length  # what check_tuples asks of a value given in Python
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
        self._check_tuples(unused)
        check_fields(
            (flag_of(f), getattr(self, f.name), f.metadata["rule"])
            for f in dataclasses.fields(self)
            if f.metadata.get("rule") is not None and f.name not in unused
        )
        self.check()

    def _check_tuples(self, unused: frozenset[str]) -> None:
        """A field the command line reads as comma-separated numbers (``--ft-epochs 3,25``,
        ``--label-noise 0.4,0.3``) holds a tuple (a list given in Python becomes one) of
        as many values as the option takes; the values themselves are the rule's."""
        for f in dataclasses.fields(self):
            parse, value = f.metadata.get("parse"), getattr(self, f.name)
            if value is None or f.name in unused or not hasattr(parse, "length"):
                continue
            if isinstance(value, list):
                value = tuple(value)
                self._set(f.name, value)
            length = parse.length
            if not isinstance(value, tuple) or (length is not None and len(value) != length):
                count = f"{length} values" if length is not None else "one value or more"
                raise ConfigError(f"{option(flag_of(f))} must be a tuple of {count}, got {value!r}")

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


def built_config(
    config_class: type[Config],
    given: Mapping[str, object],
    command: str,
    base: Config | None = None,
    settled: Mapping[str, object] | None = None,
) -> Config:
    """The configuration of ``given`` options (field name -> value; the others keep their
    defaults, or ``base``'s fields where a whole configuration is given): the one path from
    options to a configuration, for ``fedprune train`` and the Python builders alike.

    Every field's rule and the cross-field checks run in ``__post_init__``; then an option
    given that the configuration does not use (:meth:`Config.unused_fields`) is refused, not
    dropped: one :class:`~fedprune.errors.ConfigError` line naming the options in the
    command line's spelling (``--max-clusters``) and ``command`` (e.g. ``fedprune train
    caafp``); :func:`in_python_terms` rewrites such a line for a Python caller. ``settled``:
    fields the caller sets itself (your data's file, your model's name), never refused as
    unused."""
    values = {**(settled or {}), **given}
    config = config_class(**values) if base is None else dataclasses.replace(base, **values)
    unused = [name for name in given if name in config.unused_fields()]
    if unused:
        fields = {f.name: f for f in dataclasses.fields(config_class)}
        options = ", ".join("--" + flag_of(fields[name]).replace("_", "-") for name in unused)
        raise ConfigError(
            f"{options}: not used by {command} with the options given; leave "
            f"{'them' if len(unused) > 1 else 'it'} out"
        )
    return config


RUN_OPTIONS = {
    "--out": "out",
    "--data-dir": "data_dir",
    "--no-progress": "progress=False",
    "--workers": "Workers(local=...)",
    "--remote-worker": "Workers(remote=...)",
    "--remote-timeout": "Workers(remote_timeout=...)",
    "--insecure-remote": "Workers(insecure_remote=True)",
    "--unsafe-open-workers": "Workers(unsafe_open=True)",
    "--tls-ca": "Workers(tls=RemoteTLS(ca=...))",
    "--tls-cert": "Workers(tls=RemoteTLS(cert=...))",
    "--tls-key": "Workers(tls=RemoteTLS(key=...))",
}
"""The options of ``fedprune train`` that are not configuration fields, as the Python API
spells them (:meth:`fedprune.api.trainer.Trainer.run` and :class:`~fedprune.api.Workers`)."""

_OPTION = re.compile(r"--[a-z][a-z0-9-]*")
_NUMBERS = re.compile(r" (-?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?:,-?\d+(?:\.\d+)?)*)(?![\w.]*\w)")
_WORD = re.compile(r" ([a-z][a-z0-9_-]*)")


def in_python_terms(message: str, config_class: type[Config]) -> str:
    """``message`` (one line naming command-line options) as a Python caller of the builders
    reads it: every option of ``config_class`` as its keyword (``--lr`` -> ``learning_rate``,
    ``--clients`` -> ``num_clients``), a value written after it as the keyword's value
    (``--clients-per-round 2`` -> ``clients_per_round=2``, ``--phases 0,1,1`` ->
    ``phases=(0, 1, 1)``, ``--clusters auto`` -> ``clusters='auto'``), the run options as
    :data:`RUN_OPTIONS` spells them, and ``fedprune train <method>`` as ``fp.<method>``.
    Anything else is left as it is."""
    fields = {
        "--" + flag_of(f).replace("_", "-"): f
        for f in dataclasses.fields(config_class)
        if f.metadata.get("help") is not None
    }

    def keyword(option: str, rest: str) -> tuple[str, int]:
        """The Python spelling of ``option`` and how many characters of ``rest`` (what
        follows it) it took as its value."""
        if option in RUN_OPTIONS:
            return RUN_OPTIONS[option], 0
        field = fields.get(option)
        if field is None:
            return option, 0
        number = _NUMBERS.match(rest)
        if number is not None:
            values = number.group(1).split(",")
            shown = values[0] if len(values) == 1 else f"({', '.join(values)})"
            return f"{field.name}={shown}", number.end()
        word = _WORD.match(rest)
        rule = field.metadata.get("rule")
        words = {*(rule.choices or ()), "auto"} if rule is not None else {"auto"}
        if word is not None and word.group(1) in words:
            return f"{field.name}={word.group(1)!r}", word.end()
        return field.name, 0

    out, at = [], 0
    for match in _OPTION.finditer(message):
        if match.start() < at:  # inside a value already taken
            continue
        text, taken = keyword(match.group(0), message[match.end() :])
        out += [message[at : match.start()], text]
        at = match.end() + taken
    out.append(message[at:])
    return re.sub(
        r"`?fedprune train ([a-z_-]+)`?",
        lambda m: "fp." + m.group(1).replace("-", "_"),
        "".join(out),
    )


def python_error(error: FedpruneError, config_class: type[Config]) -> FedpruneError:
    """``error`` (of the same class) with its line :func:`in_python_terms`."""
    return type(error)(in_python_terms(str(error), config_class))
