"""Strategies by configuration class: the most specific registered class of a configuration's
MRO wins, a class may name its own strategy by ``"module:function"``, and the built-in tables
(mask policies, clusterers) cover every configuration class of their family."""

from __future__ import annotations

import dataclasses

import pytest

from fedprune.configs.strategies import ByConfig


@dataclasses.dataclass(frozen=True)
class Base:
    pass


@dataclasses.dataclass(frozen=True)
class Child(Base):
    pass


@dataclasses.dataclass(frozen=True)
class Named(Child):
    POLICY = "fedprune.lazy:resolve"


@dataclasses.dataclass(frozen=True)
class Dense(Child):
    POLICY = None


def test_the_most_specific_registered_class_wins():
    table = ByConfig("toy")
    table.register(Base, "base")
    assert table.of(Child()) == "base"
    table.register(Child, "child")
    assert table.of(Child()) == "child" and table.of(Base()) == "base"
    assert list(table.registered()) == [Base, Child]


def test_a_class_may_name_its_strategy_in_its_own_body():
    from fedprune.lazy import resolve

    table = ByConfig("toy", attribute="POLICY")
    table.register(Base, "base")
    assert table.of(Named()) is resolve
    assert table.of(Dense()) is None  # a class that says it has none
    assert table.of(Child()) == "base"


def test_an_unregistered_configuration_is_one_clear_error():
    with pytest.raises(LookupError, match="no toy is registered for Child"):
        ByConfig("toy").of(Child())


@pytest.mark.slow
def test_every_pipeline_and_clustering_configuration_has_its_strategy():
    import fedprune.algorithms.fedhire.clusterers  # noqa: F401 (registers the clusterers)
    import fedprune.algorithms.pipeline  # noqa: F401 (registers the mask policies)
    from fedprune.configs import fedhire, pipeline
    from fedprune.methods import METHODS

    for method in METHODS.values():
        if issubclass(method.config, pipeline.PipelineConfig):
            config = method.config("uci_har")
            policy = config.policy()
            assert (policy is None) == (not config.PRUNES), method.name
        if issubclass(method.config, fedhire.FedHireConfig):
            clusterer = method.config(dataset="ecoli").clusterer()
            assert type(clusterer) is fedhire.CLUSTERERS.of(method.config(dataset="ecoli"))
