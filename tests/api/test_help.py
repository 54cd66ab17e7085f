"""``fedprune train <method> --help`` lists the options that method accepts and no other: the
same fields as the method's table in docs/api-reference.md (both from
:func:`fedprune.configs.command_line.usable_fields`); an option left out of the help is still
refused with the configuration's own "not used" line, before anything is made."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys

import pytest

from fedprune import cli
from fedprune.api import reference
from fedprune.configs.fields import cli_fields, flag_of
from fedprune.methods import METHODS


def _help(method: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        cli.main(["train", method, "--help"])
    return out.getvalue()


def _flags(config_class: type) -> dict[str, str]:
    return {"--" + flag_of(f).replace("_", "-"): f.name for f in cli_fields(config_class)}


@pytest.mark.parametrize("method", sorted(METHODS))
def test_help_lists_exactly_the_options_the_method_accepts(method):
    entry = METHODS[method]
    flags = _flags(entry.config)
    shown = set(re.findall(r"^  (--[a-z0-9-]+)", _help(method), re.M)) & set(flags)
    builder = next(b for b in reference.page().split("\n### `fp.")[1:] if "`fedprune train "
                   f"{method}`" in b.split("\n", 3)[2])  # fmt: skip
    listed = set(re.findall(r"^\| `[a-z_0-9]+` \|.*\| `(--[a-z0-9-]+)` \|$", builder, re.M))
    assert shown == listed, method


@pytest.mark.parametrize(
    ("method", "hidden", "value"),
    [
        ("ifca", "--theta", "0.5"),
        ("ifca", "--admission", "absolute_gain"),
        ("kfed", "--eta", "0.1 --dataset ecoli"),
        ("cfl", "--epochs-rule", "uniform"),
    ],
)
def test_an_option_the_help_leaves_out_is_refused_by_name(method, hidden, value, tmp_path):
    assert f"  {hidden} " not in _help(method)
    out = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fedprune",
            "train",
            method,
            hidden,
            *value.split(),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert f"{hidden}: not used by `fedprune train {method}`" in done.stderr
    assert not out.exists()
