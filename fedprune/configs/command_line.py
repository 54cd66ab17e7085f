"""``fedprune train <method>`` options generated from a configuration class's fields.

For each field made by :func:`~fedprune.configs.fields.param` (and not ``cli=False``):
``--<flag>`` (``flag`` or the field name, ``_`` -> ``-``), the help text followed by the
default and the rule's range (``clients sampled per round (default: 10; integer >= 1)``), the
rule's choices, a ``store_true`` switch for a boolean, and the field's ``parse`` for tuples
(``--phases 0,0,50``). Every option's argparse default is ``None``: options not given are
left out, so the configuration class's own defaults apply (a method's subclass changes them
in one place), and :func:`config_from_options` builds the configuration, whose
``__post_init__`` checks everything (one ``ConfigError`` line naming the option). An option
given that the configuration does not use (:meth:`Config.unused_fields`, e.g. ``--eps1`` for
``train ascfl``, ``--dirtiness`` with ``--init kmeans-ae``) is an error too, not dropped
silently. A field the method never uses, whatever the other options (AS-CFL's ``--theta``
for ``train ifca``), is parsed but left out of ``--help`` (:func:`usable_fields`), so that
``--help`` lists what the method accepts and giving it anyway is that same one line.

Why not a library: the two well-kept candidates were tried (November 2026). tyro 1.0 requires
typing-extensions >= 4.13, which conflicts with TFF 0.87's pin (typing-extensions 4.5.*), and
prints its errors as multi-line boxes. simple-parsing 0.1.9 installs, but parsed
``--phases 1,2,3`` into ``((1, 2, 3),)`` (a tuple field with a custom type gets ``nargs``),
adds options we do not have (``--learning-rate`` next to ``--lr``, ``--nostandardize``),
gives ``None``-default floats an optional value (``--alpha [float]``), cannot show our ranges,
and builds the dataclass inside ``parse_args``. Working around all of that would be longer
than this module.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import types
import typing
from collections.abc import Iterator, Mapping

from fedprune.configs.fields import Config, built_config, cli_fields, flag_of

EXAMPLE_DATASET = {"windows": "uci_har", "table": "ecoli", "images": "mnist", "": "mnist"}
"""A built-in dataset of each kind of data (a method registry entry's ``data``), given where
a configuration requires a dataset to probe which fields the method uses."""


def _value_type(hint: object) -> object:
    """``float`` for ``float | None``; the hint itself otherwise."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        kinds = [a for a in typing.get_args(hint) if a is not type(None)]
        return kinds[0] if len(kinds) == 1 else hint
    return hint


def _shown(value: object) -> str:
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _help(field: dataclasses.Field) -> str:
    """The help text, then ``(default: ...; range)``; ``%`` escaped for argparse."""
    meta = field.metadata
    notes = []
    if field.default is not dataclasses.MISSING and not isinstance(field.default, bool):
        shown = meta.get("default_text") if field.default is None else _shown(field.default)
        notes.append(f"default: {shown}")
    rule = meta.get("rule")
    if rule is not None and rule.text:
        notes.append(rule.text)
    text = meta["help"] + (f" ({'; '.join(notes)})" if notes else "")
    return text.replace("%", "%%")


def argparse_type(parse: typing.Callable[[str], object]) -> typing.Callable[[str], object]:
    """``parse`` with its ValueError message shown by argparse as is."""

    def convert(text: str) -> object:
        try:
            return parse(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    return convert


# ``--help`` headings of a method's options, in order; METHOD_GROUP holds the method's own
DATA_GROUP = "data"
FEDERATION_GROUP = "federated training"
METHOD_GROUP = "the method's own options"
PRUNING_GROUP = "pruning"
FINE_TUNING_GROUP = "fine-tuning (personal models)"
WATCHING_GROUP = "watching the run"
GROUPS = (
    DATA_GROUP,
    FEDERATION_GROUP,
    METHOD_GROUP,
    PRUNING_GROUP,
    FINE_TUNING_GROUP,
    WATCHING_GROUP,
)
# the heading of a field by its name; a field's own ``group`` wins, any other is the method's
GROUP_OF = {
    **dict.fromkeys(
        (
            "dataset", "split", "standardize", "label_noise", "classes_per_client",
            "num_clients", "samples_per_class", "overlap", "max_classes", "labels", "min_frac",
            "max_frac", "proxy_size", "proxy_rotation", "partition",
        ),
        DATA_GROUP,
    ),
    **dict.fromkeys(
        (
            "phases", "rounds", "clients_per_round", "local_epochs", "batch_size",
            "learning_rate", "seed", "client_dropout", "scale", "model", "epochs_rule",
            "lr_decay", "fl_rounds", "fl_local_epochs", "max_iterations",
        ),
        FEDERATION_GROUP,
    ),
    **dict.fromkeys(
        (
            "start_sparsity", "target_sparsity", "prune_frequency", "churn", "block",
            "budget", "prune_layers",
        ),
        PRUNING_GROUP,
    ),
    "ft_epochs": FINE_TUNING_GROUP,
    "eval_every": WATCHING_GROUP,
}  # fmt: skip


def group_of(field: dataclasses.Field) -> str:
    """The ``--help`` heading of a configuration field (:data:`GROUPS`)."""
    return field.metadata.get("group") or GROUP_OF.get(field.name, METHOD_GROUP)


def required_example(config_class: type[Config], data: str = "") -> dict[str, str]:
    """``{"dataset": a built-in dataset of kind data}`` where ``config_class`` has no default
    dataset (:data:`EXAMPLE_DATASET`), else ``{}``: what probing the class needs."""
    return {
        f.name: EXAMPLE_DATASET[data]
        for f in dataclasses.fields(config_class)
        if f.name == "dataset" and f.default is dataclasses.MISSING
    }


def _settings(config_class: type[Config], required: Mapping) -> list[tuple[str, object]]:
    """One field set away from its default each: every choice of a choice field (and
    ``clusters="auto"``), and a numeric field whose default is 0 or ``None`` set to the first
    of 1, 0.5, 2 the configuration accepts (``client_dropout=0.5``)."""
    from fedprune.errors import FedpruneError

    settings: list[tuple[str, object]] = []
    for field in cli_fields(config_class):
        rule = field.metadata.get("rule")
        choices = (rule.choices or ()) if rule is not None else ()
        settings += [(field.name, choice) for choice in choices]
        if field.name == "clusters":
            settings.append(("clusters", "auto"))
    for field in cli_fields(config_class):
        default = field.default
        if isinstance(default, bool) or (default is not None and default != 0):
            continue
        for value in (1, 0.5, 2):
            try:
                config_class(**{**required, field.name: value})
            except (FedpruneError, TypeError, ValueError):
                continue
            settings.append((field.name, value))
            break
    return settings


def _probes(config_class: type[Config], required: Mapping) -> Iterator[tuple[str, Config]]:
    """(condition, configuration) for the defaults, for each setting of :func:`_settings`
    and for each pair of them (two fields): the settings under which a field can be used
    (``recluster="split-merge"`` needs ``clusters="auto"`` where the default K is 1). A
    setting the configuration refuses with the others at their defaults is passed over."""
    from fedprune.errors import FedpruneError

    singles = _settings(config_class, required)
    pairs = [(a, b) for i, a in enumerate(singles) for b in singles[i + 1 :] if a[0] != b[0]]
    for setting in [(), *((s,) for s in singles), *pairs]:
        try:
            config = config_class(**{**required, **dict(setting)})
        except (FedpruneError, TypeError, ValueError):
            continue
        yield ", ".join(f"{k}={v!r}" for k, v in setting), config


@functools.cache
def usable_fields(config_class: type[Config], data: str = "") -> dict[str, str]:
    """The command-line fields ``config_class`` uses, each with the setting under which it
    does (``""``: at the defaults; ``"clusters='auto'"``: only with that), in field order;
    a field missing here is refused whatever else is given (:meth:`Config.unused_fields`
    under the defaults, each setting of one field and each pair of settings of two fields).
    ``data``: the method's kind of data, for a class that requires a dataset
    (:func:`required_example`)."""
    names = {f.name for f in cli_fields(config_class)}
    when: dict[str, str] = {}
    for condition, config in _probes(config_class, required_example(config_class, data)):
        for name in sorted(names - config.unused_fields()):
            when.setdefault(name, condition)
    return {f.name: when[f.name] for f in cli_fields(config_class) if f.name in when}


def _hiding(formatter: type[argparse.HelpFormatter], hidden: typing.Callable[[], set[str]]) -> type:
    """``formatter`` leaving out of usage and help the options whose dest is in ``hidden()``
    (computed when the help is shown, not when the parser is built)."""

    class Hiding(formatter):
        def add_usage(self, usage, actions, groups, prefix=None):  # noqa: ANN001, ANN202
            shown = [a for a in actions if a.dest not in hidden()]
            return super().add_usage(usage, shown, groups, prefix)

        def add_argument(self, action):  # noqa: ANN001, ANN202
            if action.dest not in hidden():
                super().add_argument(action)

    return Hiding


def add_config_options(
    parser: argparse.ArgumentParser, config_class: type[Config], data: str | None = None
) -> None:
    """Add one option per command-line field of ``config_class`` (dest: the field name),
    under the headings of :data:`GROUPS` that have options, in that order. With ``data``
    (the method's kind of data, :func:`required_example`), a field the method never uses
    (:func:`usable_fields`) is still parsed, so that giving it is the configuration's own
    "not used" line, but left out of ``--help`` (worked out only when the help is shown)."""
    hints = typing.get_type_hints(config_class)
    fields = list(cli_fields(config_class))
    if data is not None:
        names = {f.name for f in fields}
        parser.formatter_class = _hiding(
            parser.formatter_class, lambda: names - set(usable_fields(config_class, data))
        )
    groups = {
        title: parser.add_argument_group(title)
        for title in GROUPS
        if any(group_of(f) == title for f in fields)
    }
    for field in fields:
        meta = field.metadata
        option = "--" + flag_of(field).replace("_", "-")
        kind = _value_type(hints[field.name])
        kwargs: dict = dict(dest=field.name, default=None, help=_help(field))
        if kind is bool:  # unset (None) means "decided later": then --x / --no-x
            kwargs["action"] = (
                argparse.BooleanOptionalAction if field.default is None else "store_true"
            )
        else:
            parse = meta.get("parse") or kind
            if not callable(parse) or typing.get_origin(parse) is not None:
                raise TypeError(f"{config_class.__name__}.{field.name} needs a parse function")
            kwargs["type"] = argparse_type(parse) if meta.get("parse") else parse
            rule = meta.get("rule")
            if rule is not None and rule.choices:
                kwargs["choices"] = rule.choices  # argparse shows them as the metavar
            else:
                kwargs["metavar"] = meta.get("metavar") or flag_of(field).upper()
        if field.default is dataclasses.MISSING:
            kwargs["required"] = True
        groups[group_of(field)].add_argument(option, **kwargs)


def config_from_options(
    config_class: type[Config], args: argparse.Namespace, command: str = "this command"
) -> Config:
    """``config_class`` built from the options given in ``args`` (unset ones: its defaults)
    by :func:`~fedprune.configs.fields.built_config`, the path the Python builders take too:
    a bad value, or an option given that the configuration does not use, raises one
    ConfigError line (``command`` names the command in that line, e.g. ``train cfl``)."""
    given = {
        f.name: getattr(args, f.name)
        for f in cli_fields(config_class)
        if getattr(args, f.name, None) is not None
    }
    return built_config(config_class, given, command)
