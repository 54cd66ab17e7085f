"""The Python API's reference page, generated from the code that defines the API.

Each builder's keywords come from its method's configuration class (:mod:`fedprune.configs`):
every field the command line offers, with its type as declared, its default, the values its
:class:`~fedprune.checks.Rule` allows, its ``--help`` text and its command-line flag, so the
page says exactly what the builders check. The data constructors, :class:`Trainer.run`,
:class:`Workers`, :class:`Result` and :func:`open_result` are given by their signatures and
docstrings. ``tests/api/test_reference.py`` keeps ``docs/api-reference.md`` equal to what
this module writes::

    python -m fedprune.api.reference docs/api-reference.md
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from fedprune.configs.command_line import EXAMPLE_DATASET, usable_fields
from fedprune.configs.fields import cli_fields, flag_of

TITLE = "# Python API reference"
DATASET_EXAMPLE = EXAMPLE_DATASET  # a built-in dataset of each kind, to probe the fields
INTRO = """\
Generated from the code (`python -m fedprune.api.reference docs/api-reference.md`; a test
keeps it in sync). [api.md](api.md) walks through a whole case; this page lists every
keyword. Errors raised from Python name these keywords; the command line's flags are beside
them.

`import fedprune as fp` imports no TensorFlow; running a trainer does."""


def _cell(text: object) -> str:
    """``text`` for one Markdown table cell (no line breaks, no bare pipes)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        shown = field.metadata.get("default_text") if field.default is None else None
        return f"`{field.default!r}`" + (f" ({shown})" if shown else "")
    if field.default_factory is not dataclasses.MISSING:
        return f"`{field.default_factory()!r}`"
    return "required"


def _allowed(field: dataclasses.Field) -> str:
    rule = field.metadata.get("rule")
    if rule is None:
        return ""
    if rule.choices:
        return ", ".join(f"`{c}`" for c in rule.choices)
    return rule.text


def _keywords(config_class: type, data: str) -> Iterator[str]:
    """The rows of one builder's keyword table: the fields the method uses with its
    defaults, then those it uses only with another setting (said in the row); fields it
    never uses are left out, as the builder refuses them (and ``--help`` leaves them out:
    both from :func:`fedprune.configs.command_line.usable_fields`)."""
    when = usable_fields(config_class, data)
    yield "| keyword | type | default | allowed | meaning | command line |"
    yield "|---|---|---|---|---|---|"
    for field in sorted(cli_fields(config_class), key=lambda f: when.get(f.name) != ""):
        if field.name not in when:
            continue
        flag = "--" + flag_of(field).replace("_", "-")
        only = f"(only with `{when[field.name]}`) " if when[field.name] else ""
        cells = (
            f"`{field.name}`",
            f"`{field.type}`",
            _default(field),
            _allowed(field),
            only + (field.metadata.get("help") or ""),
            f"`{flag}`",
        )
        yield "| " + " | ".join(_cell(c) for c in cells) + " |"


def _builder_section(name: str, builder: Callable) -> Iterator[str]:
    from fedprune.methods import METHODS

    entry = METHODS[builder.method]
    data = {"windows": "windows", "images": "images", "table": "table", "": ""}[entry.data]
    takes = []
    if data:
        takes.append(f"your {data} or a built-in dataset's name")
    if entry.takes_model:
        takes.append("your model (`model_fn`)")
    yield f"### `fp.{name}`"
    yield ""
    yield f"{entry.summary} (`fedprune train {builder.method}`). Configuration: "
    yield f"`{entry.config.__name__}`" + (f"; takes {' and '.join(takes)}." if takes else ".")
    yield ""
    yield from _keywords(entry.config, entry.data)
    yield ""


def _signature(thing: Callable) -> str:
    """``(name: type = default, ...)`` without ``self``, types as written in the code."""
    words, star = [], False
    for p in inspect.signature(thing).parameters.values():
        if p.name == "self":
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            words.append("*")
            star = True
        word = ("**" if p.kind is p.VAR_KEYWORD else "") + p.name
        if p.annotation is not p.empty:
            word += f": {p.annotation}"
        if p.default is not p.empty:
            word += f" = {p.default!r}"
        words.append(word)
    return f"({', '.join(words)})"


def _documented(title: str, thing: Callable, prop: bool = False) -> Iterator[str]:
    """A function or class (``prop``: a property's getter, shown without a call): its
    signature and its docstring as a plain text block."""
    yield f"### `{title}` (property)" if prop else f"### `{title}{_signature(thing)}`"
    yield ""
    yield "```text"
    yield from (inspect.getdoc(thing) or "").splitlines()
    yield "```"
    yield ""


def page() -> str:
    """The whole reference page as Markdown."""
    import fedprune as fp

    lines = [TITLE, "", INTRO, "", "## Builders", ""]
    lines += [
        "Every builder is `fp.NAME(data=None, *, model_fn=None, config=None, **keywords)` and "
        "returns a `Trainer`; `config` is a whole configuration whose fields the keywords "
        "replace. A keyword the method does not use with the others given (for example "
        '`max_clusters` without `clusters="auto"`) is refused, as on the command line.',
        "",
    ]
    for name, builder in sorted((b.__name__, b) for b in fp.BUILDERS.values()):
        lines += _builder_section(name, builder)
    lines += ["## Running", ""]
    lines += _documented("Trainer.run", fp.Trainer.run)
    lines += _documented("fp.Workers", fp.Workers)
    lines += ["## Results", ""]
    lines += _documented("fp.open_result", fp.open_result)
    lines += _documented("fp.Result", fp.Result)
    for member, value in inspect.getmembers(fp.Result):
        if member.startswith("_"):
            continue
        if isinstance(value, property):
            lines += _documented(f"Result.{member}", value.fget, prop=True)
        elif callable(value):
            lines += _documented(f"Result.{member}", value)
    lines += ["## Your data", ""]
    for name in (
        "from_arrays",
        "from_clients",
        "from_client_data",
        "read_npz",
        "write_npz",
        "from_table",
        "from_images",
        "images_from_client_data",
        "partition_by_subject",
        "time_ordered_split",
        "standardize_all",
    ):
        lines += _documented(f"fp.{name}", getattr(fp, name))
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m fedprune.api.reference [PATH]``: write the page to PATH, else print it."""
    args = sys.argv[1:] if argv is None else argv
    text = page()
    if not args:
        sys.stdout.write(text)
        return 0
    from fedprune.runs.files import write_text

    write_text(Path(args[0]), text)
    print(f"wrote {args[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
