"""AS-CFL's configuration: --scale fills in the model, rounds and local epochs."""

import pytest

from fedprune.configs.ascfl import (
    ASCFL_OPTIONS,
    SCALES,
    CFLConfig,
    CFLFixedConfig,
    ClusteredImageConfig,
    IFCAConfig,
)
from fedprune.errors import ConfigError


def test_scale_fills_in_the_budget_and_explicit_values_win():
    scaled, paper = ClusteredImageConfig(), ClusteredImageConfig(scale="paper")
    assert (scaled.model, scaled.rounds, scaled.local_epochs) == SCALES["scaled"]
    assert (paper.model, paper.rounds, paper.local_epochs) == ("image_cnn", 100, 10)
    mixed = ClusteredImageConfig(scale="paper", rounds=8)
    assert (mixed.rounds, mixed.local_epochs) == (8, 10)


def test_scale_is_not_recorded_so_older_run_directories_resume():
    recorded = ClusteredImageConfig(scale="paper").recorded()
    assert "scale" not in recorded and recorded["rounds"] == 100
    # a run directory written before --scale existed records the same dict
    assert (
        ClusteredImageConfig().recorded()
        == ClusteredImageConfig(model="image_cnn_small", rounds=30, local_epochs=1).recorded()
    )


def test_bad_scale_is_one_line():
    with pytest.raises(ConfigError, match="--scale must be one of scaled, paper"):
        ClusteredImageConfig(scale="huge")
    with pytest.raises(ConfigError, match="--rounds"):
        ClusteredImageConfig(scale="paper", rounds=0)


def test_the_class_runs_its_method_and_the_method_name_is_only_recorded():
    assert CFLConfig().method == "cfl" and CFLConfig().recorded()["method"] == "cfl"
    with pytest.raises(ConfigError, match="ClusteredImageConfig runs ascfl, not cfl"):
        ClusteredImageConfig(method="cfl")


def test_each_method_checks_its_own_options():
    # AS-CFL's thresholds and warm-up are checked for AS-CFL only
    with pytest.raises(ConfigError, match="--split-threshold"):
        ClusteredImageConfig(split_threshold=0.2, merge_threshold=0.3)
    with pytest.raises(ConfigError, match="--warmup-rounds"):
        ClusteredImageConfig(rounds=5, warmup_rounds=5)
    assert CFLConfig(split_threshold=0.2, merge_threshold=0.3, rounds=5, warmup_rounds=5)
    # K: at most the reporting clients (CFL fixed-K), at most the clients (IFCA)
    with pytest.raises(ConfigError, match="--clusters must be at most 3"):
        CFLFixedConfig(num_clients=4, client_dropout=0.25, clusters=4)
    assert IFCAConfig(num_clients=4, client_dropout=0.25, clusters=4).clusters == 4
    with pytest.raises(ConfigError, match="--clusters must be at most 4"):
        IFCAConfig(num_clients=4, clusters=5)
    # every method: the shared checks
    for config in (ClusteredImageConfig, CFLConfig, CFLFixedConfig, IFCAConfig):
        with pytest.raises(ConfigError, match="--min-frac"):
            config(min_frac=0.7, max_frac=0.5)


def test_each_method_leaves_the_options_it_does_not_use():
    unused = {"clusters", "max_clusters", "eps1", "eps2", "late_clients"}
    assert ClusteredImageConfig().unused_fields() == unused
    assert "late_clients" not in ClusteredImageConfig(client_dropout=0.1).unused_fields()
    assert ASCFL_OPTIONS <= CFLConfig().unused_fields()
    assert {"eps1", "eps2"} & CFLConfig().unused_fields() == set()
    assert "clusters" not in CFLFixedConfig(clusters=2).unused_fields()
    assert "clusters" not in IFCAConfig().unused_fields()
    assert {"eps1", "eps2"} <= IFCAConfig().unused_fields()
    assert not IFCAConfig(client_dropout=0.1).has_late_clients
