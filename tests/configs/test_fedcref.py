"""FedCRef's configurations: the flat run configuration, its parts and config.json's dict
(written by hand from the pre-refactoring ``run_fedcref_experiment``)."""

import dataclasses

import pytest

from fedprune.configs.fedcref import (
    IMAGE_DATASETS,
    FedCRefConfig,
    FedCRefRunConfig,
    SystemConfig,
)
from fedprune.errors import ConfigError

RECORDED_DEFAULT = {
    "method": "fedcref",
    "dataset": "mnist",
    "split": "train",
    "num_clients": 25,
    "samples_per_class": 500,
    "overlap": 0.0,
    "init": "dirty",
    "dirtiness": 0.3,
    "alpha": 75.0,
    "theta": 0.2,
    "tau": 0.8,
    "local_epochs": 20,
    "fl_rounds": 15,
    "fl_local_epochs": 1,
    "batch_size": 32,
    "learning_rate": 1e-3,
    "max_iterations": 30,
    "stop_window": 3,
    "stop_tolerance": 0.1,
    "seed": 0,
}


def test_recorded_equals_the_pre_refactoring_dict():
    assert FedCRefRunConfig().recorded() == RECORDED_DEFAULT
    with_max = FedCRefRunConfig(max_classes=3).recorded()
    assert with_max == {**RECORDED_DEFAULT, "max_classes": 3}


def test_parts_hold_the_flat_fields():
    run = FedCRefRunConfig(dataset="kmnist", split="test", num_clients=4, local_epochs=2, seed=7)
    assert run.system() == SystemConfig("kmnist", "test", num_clients=4)
    assert run.algorithm() == FedCRefConfig(local_epochs=2, seed=7)
    names = [f.name for f in dataclasses.fields(FedCRefRunConfig)]
    parts = [f.name for p in (SystemConfig, FedCRefConfig) for f in dataclasses.fields(p)]
    assert names == ["method", *parts]


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(num_clients=1), "--clients must be an integer >= 2, got 1"),
        (dict(local_epochs=0), "--epochs must be an integer >= 1, got 0"),
        (dict(learning_rate=-1.0), r"--lr must be in \(0, inf\)"),
        (dict(alpha=0.0), r"--alpha must be in \(0, 100\]"),
        (dict(theta=1.5), r"--theta must be in \[0, 1\]"),
        (dict(tau=-0.1), r"--tau must be in \[0, 1\]"),
        (dict(dirtiness=1.0), r"--dirtiness must be in \[0, 1\)"),
        (dict(overlap=1.5), r"--overlap must be in \[0, 1\]"),
        (dict(max_classes=1), "--max-classes must be an integer >= 2"),
        (dict(init="kmeans"), "--init must be one of dirty, kmeans-ae"),
        (dict(stop_window=1), "--stop-window must be an integer >= 2"),
    ],
)
def test_bad_parameters_name_the_option(change, message):
    with pytest.raises(ConfigError, match=message):
        FedCRefRunConfig(**change)


def test_dirtiness_only_matters_for_dirty_init():
    assert SystemConfig(init="kmeans-ae", dirtiness=5.0).dirtiness == 5.0
    assert FedCRefRunConfig(init="kmeans-ae", dirtiness=5.0).system().init == "kmeans-ae"
    with pytest.raises(ConfigError, match="--dirtiness"):
        SystemConfig(dirtiness=1.5)


def test_image_datasets_agree_with_the_loader():
    from fedprune.data.images import NAMES

    assert IMAGE_DATASETS == NAMES
