"""AS-CFL's configuration: --scale fills in the model, rounds and local epochs."""

import pytest

from fedprune.configs.ascfl import SCALES, ClusteredImageConfig
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
