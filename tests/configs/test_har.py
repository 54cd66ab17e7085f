"""FedAvg's and ClusterFL's configurations, and the HAR fields they share."""

import dataclasses

import pytest

from fedprune.configs.clusterfl import ClusterFLConfig
from fedprune.configs.fedavg import FedAvgConfig
from fedprune.configs.har import HAR_DATASETS
from fedprune.configs.protocol import BEFORE_SPLIT, with_protocol
from fedprune.errors import ConfigError


def resumed_old(config) -> dict:
    """What ``config`` records when it resumes a run directory made before ``--split``
    (``standardize`` recorded as false, no ``split``, no scenario, no ``eval_every``): the
    dict such a run holds (``runs.as_recorded`` leaves the later options out)."""
    settled = with_protocol(config, {"standardize": False})
    assert settled.split == "random"
    later = config.ADDED_LATER
    assert set(BEFORE_SPLIT) <= set(later)
    return {k: v for k, v in dataclasses.asdict(settled).items() if k not in later}


def test_default_dicts_are_the_pre_refactoring_ones():
    assert resumed_old(FedAvgConfig("wisdm")) == {
        "dataset": "wisdm",
        "rounds": 50,
        "clients_per_round": 10,
        "local_epochs": 3,
        "batch_size": 32,
        "learning_rate": 1e-3,
        "seed": 0,
        "standardize": False,
        "method": "fedavg",
    }
    assert resumed_old(ClusterFLConfig("uci_har")) == {
        "dataset": "uci_har",
        "rounds": 50,
        "clusters": 3,
        "rho": 5e-3,
        "alpha": 1e-3,
        "beta": 5e-4,
        "clients_per_round": 10,
        "local_epochs": 3,
        "batch_size": 32,
        "learning_rate": 1e-3,
        "ft_epochs": (3, 25),
        "seed": 0,
        "standardize": False,
        "method": "clusterfl",
    }


@pytest.mark.parametrize(
    "config_class, change, message",
    [
        (FedAvgConfig, dict(rounds=0), "--rounds must be an integer >= 1, got 0"),
        (FedAvgConfig, dict(learning_rate=float("inf")), "--lr must be a finite number"),
        (FedAvgConfig, dict(clients_per_round=2.5), "--clients-per-round must be an integer"),
        (ClusterFLConfig, dict(learning_rate=0.0), r"--lr must be in \(0, inf\), got 0.0"),
        (ClusterFLConfig, dict(rho=0.0), r"--rho must be in \(0, inf\)"),
        (ClusterFLConfig, dict(beta=-1.0), r"--beta must be in \[0, inf\)"),
        # 2 alpha + rho - 2 beta = 0 + 1e-3 - 2e-3 < 0: the Omega step's system is singular
        (ClusterFLConfig, dict(rho=1e-3, alpha=0.0, beta=1e-3), "for the Omega step"),
        (ClusterFLConfig, dict(ft_epochs=()), "--ft-epochs needs at least one value"),
    ],
)
def test_bad_parameters_name_the_option(config_class, change, message):
    with pytest.raises(ConfigError, match=message):
        config_class(**{"dataset": "uci_har", **change})


def test_omega_condition_boundary():
    # 2 * 1e-3 + 0 ... rho must be > 0, so take alpha = beta: margin = rho > 0 is accepted
    assert ClusterFLConfig("uci_har", alpha=1e-3, beta=1e-3, rho=1e-6).rho == 1e-6


def test_har_datasets_agree_with_the_data_registry():
    from fedprune.data.registry import DATASETS

    assert HAR_DATASETS == DATASETS


def test_the_silhouette_threshold_in_the_help_agrees_with_the_rule():
    from fedprune.algorithms.caafp.choose_k import MIN_SILHOUETTE
    from fedprune.configs import har

    assert har.MIN_SILHOUETTE == MIN_SILHOUETTE


def test_clusterfl_keeps_an_integer_k():
    with pytest.raises(ConfigError, match="--clusters must be an integer >= 1, got 'auto'"):
        ClusterFLConfig("uci_har", clusters="auto")


def test_new_runs_get_the_time_ordered_split_and_the_protocols_standardization():
    assert with_protocol(FedAvgConfig("wisdm"), None).split == "time-ordered"
    assert with_protocol(FedAvgConfig("wisdm"), None).standardize is True
    assert with_protocol(FedAvgConfig("uci_har"), None).standardize is False
    recorded = {"split": "random", "standardize": True}  # a resumed run keeps its own
    assert (with_protocol(FedAvgConfig("uci_har"), recorded).split, True) == ("random", True)
    explicit = FedAvgConfig("wisdm", split="random", standardize=False)
    assert with_protocol(explicit, None) == explicit  # given values always win
    with pytest.raises(ConfigError, match="--split"):
        FedAvgConfig("wisdm", split="shuffled")
