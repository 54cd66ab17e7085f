"""docs/api-reference.md is what :mod:`fedprune.api.reference` generates, and what it lists is
what the builders accept: a keyword left out of a builder's table is refused by that builder."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import fedprune as fp
from fedprune.api import reference
from fedprune.configs.fields import cli_fields
from fedprune.errors import ConfigError
from fedprune.methods import METHODS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "api-reference.md"


def test_the_page_is_the_generated_one():
    assert (
        PAGE.read_text(encoding="utf-8") == reference.page()
    ), "docs/api-reference.md is stale: python -m fedprune.api.reference docs/api-reference.md"


def _listed(name: str) -> set[str]:
    """The keywords the page's table of builder ``fp.NAME`` lists."""
    text = reference.page()
    section = text.split(f"### `fp.{name}`", 1)[1].split("\n### ", 1)[0]
    return set(re.findall(r"^\| `([a-z_0-9]+)` \|", section, re.M))


@pytest.mark.parametrize("builder", sorted(fp.BUILDERS.values(), key=lambda b: b.__name__),
                         ids=lambda b: b.__name__)  # fmt: skip
def test_a_keyword_the_page_leaves_out_is_refused_by_the_builder(builder):
    entry = METHODS[builder.method]
    listed = _listed(builder.__name__)
    assert listed, builder.__name__
    dataset = next(f for f in dataclasses.fields(entry.config) if f.name == "dataset")
    required = dataset.default is dataclasses.MISSING
    data = reference.DATASET_EXAMPLE[entry.data] if required else None
    for field in cli_fields(entry.config):
        if field.name in listed or field.name == "dataset":
            continue
        value = field.default if field.default is not dataclasses.MISSING else None
        with pytest.raises(ConfigError, match=rf"\b{field.name}\b.*not used"):
            builder(data, **{field.name: value})


def test_a_keyword_used_only_with_another_setting_says_which():
    assert "(only with `clusters='auto'`)" in reference.page().split("### `fp.caafp`")[1]
    assert "theta" not in _listed("cfl")  # AS-CFL's option, which CFL refuses
