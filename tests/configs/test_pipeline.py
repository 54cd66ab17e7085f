"""The pipeline configurations: what construction fills in, orders and refuses, and the dicts
that config.json records (written by hand from the pre-refactoring factories + resolved())."""

import dataclasses
import re

import pytest

from fedprune.configs.pipeline import (
    BUDGETS,
    PAPER_SCORE_WEIGHTS,
    CAAFPConfig,
    EfficientFLConfig,
    FedCHARConfig,
    FedSNIPConfig,
    GlobalFTConfig,
    PipelineConfig,
)
from fedprune.configs.protocol import BEFORE_SPLIT, with_protocol
from fedprune.errors import ConfigError


def resumed_old(config) -> dict:
    """What ``config`` records when it resumes a run directory made before ``--split``
    (``standardize`` recorded as false, no ``split``, no scenario, no ``eval_every``, no
    choice of K): the dict such a run holds (``runs.as_recorded`` leaves the later options
    out)."""
    settled = with_protocol(config, {"standardize": False})
    assert settled.split == "random"
    later = {*BEFORE_SPLIT, "eval_every", "max_clusters", "cluster_signal", "recluster"}
    later |= {"cluster_signal_noise", "cluster_signal_clip"}
    later |= {"recluster_every", "split_threshold", "merge_threshold", "split_guard"}
    later |= {"structure"}
    assert later <= set(config.ADDED_LATER)
    return {k: v for k, v in dataclasses.asdict(settled).items() if k not in later}


CAAFP_UCI_HAR = {
    "dataset": "uci_har",
    "method": "caafp",
    "phases": (0, 0, 50),
    "clusters": 3,
    "clients_per_round": 10,
    "local_epochs": 3,
    "batch_size": 32,
    "learning_rate": 1e-3,
    "prox": 1e-3,
    "start_sparsity": 0.7,
    "target_sparsity": 0.7,
    "prune_frequency": 5,
    "churn": 0.05,
    "alpha": 0.5,
    "beta": 0.25,
    "gamma": 0.25,
    "block": 1,
    "budget": "global",
    "prune_layers": None,
    "ft_epochs": (3, 25),
    "seed": 0,
    "standardize": False,
}


def test_default_caafp_records_the_pre_refactoring_dict():
    assert resumed_old(CAAFPConfig("uci_har")) == CAAFP_UCI_HAR
    assert resumed_old(PipelineConfig("uci_har")) == CAAFP_UCI_HAR


def test_default_fedchar_records_the_pre_refactoring_dict():
    expected = {
        **CAAFP_UCI_HAR,
        "dataset": "wisdm",
        "method": "fedchar",
        "phases": (10, 40, 0),
        "start_sparsity": 0.0,
        "target_sparsity": 0.0,
        "alpha": 0.25,
        "beta": 0.25,
        "gamma": 0.5,
    }
    assert resumed_old(FedCHARConfig("wisdm")) == expected


def test_method_defaults():
    assert GlobalFTConfig("uci_har").clusters == 1
    assert GlobalFTConfig("uci_har").method == "global_ft"
    for cls, name in ((EfficientFLConfig, "efficientfl"), (FedSNIPConfig, "fedsnip")):
        config = cls("uci_har")
        assert config.method == name
        assert (config.phases, config.clusters, config.prox) == ((0, 0, 50), 1, 0.0)
        assert (config.start_sparsity, config.target_sparsity, config.churn) == (0.0, 0.7, 0.0)
        assert config.prune_frequency == 1


@pytest.mark.parametrize("dataset", ["uci_har", "wisdm"])
def test_unset_score_weights_take_the_papers_for_the_dataset(dataset):
    config = CAAFPConfig(dataset)
    assert (config.alpha, config.beta, config.gamma) == PAPER_SCORE_WEIGHTS[dataset]
    given = CAAFPConfig(dataset, alpha=0.2, beta=0.3, gamma=0.5)
    assert (given.alpha, given.beta, given.gamma) == (0.2, 0.3, 0.5)


def test_prune_layers_are_put_in_model_order_once():
    config = CAAFPConfig("uci_har", prune_layers=["probs", "conv1", "probs"])
    assert config.prune_layers == ("conv1", "probs")
    assert CAAFPConfig("uci_har").prune_layers is None


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(alpha=0.5, beta=0.5, gamma=0.5), r"--alpha \+ --beta \+ --gamma must be 1, got 1.5"),
        (dict(alpha=0.5), "give all of --alpha, --beta, --gamma or none"),
        (dict(alpha=1.5, beta=0.0, gamma=-0.5), r"--alpha must be in \[0, 1\], got 1.5"),
        (dict(phases=(0, 0, 0)), "--phases T0,T1,T2 must be 3 integers >= 0 and not all 0"),
        (dict(phases=(1, -1, 2)), "--phases"),
        (dict(start_sparsity=1.0), r"--start-sparsity must be in \[0, 1\), got 1.0"),
        (dict(prune_frequency=60), "--prune-frequency 60 is more than the 50 pruning round"),
        (dict(churn=2.0), r"--churn must be in \[0, 1\]"),
        (dict(learning_rate=0.0), r"--lr must be in \(0, inf\)"),
        (dict(prox=float("nan")), "--prox must be a finite number"),
        (dict(block=0), "--block must be an integer >= 1"),
        (dict(budget="per-layer"), "--budget must be one of global, layerwise"),
        (dict(ft_epochs=()), "--ft-epochs needs at least one value"),
        (dict(ft_epochs=(3, -1)), "--ft-epochs must be an integer >= 0"),
        (dict(prune_layers=("fc",)), r"unknown or missing layer name \(fc\)"),
        (dict(seed=2**31), "--seed must be an integer in"),
        (dict(dataset="mnist"), "--dataset must be one of uci_har, wisdm"),
    ],
)
def test_bad_parameters_name_the_option(change, message):
    with pytest.raises(ConfigError, match=message):
        CAAFPConfig(**{"dataset": "uci_har", **change})


def test_schedule_is_checked_only_with_masked_rounds():
    # T2 = 0: the prune-and-heal parameters are unused, so a frequency above T2 is fine
    assert FedCHARConfig("uci_har", prune_frequency=60).phases[2] == 0
    schedule = CAAFPConfig("uci_har", phases=(0, 0, 10), prune_frequency=2).schedule()
    assert (schedule.rounds, schedule.frequency, schedule.target_sparsity) == (10, 2, 0.7)


def test_budgets_agree_with_the_mask_module():
    from fedprune.sparsity.masks import BUDGETS as MASK_BUDGETS

    assert BUDGETS == MASK_BUDGETS


def test_a_prune_frequency_above_the_pruning_rounds_names_both_options():
    with pytest.raises(ConfigError, match=r"--prune-frequency 5 is more than the 3 pruning") as err:
        CAAFPConfig(dataset="uci_har", phases=(0, 0, 3))
    assert "give --prune-frequency 3 or less, or --phases 0,0,5 or more" in str(err.value)
    CAAFPConfig(dataset="uci_har", phases=(0, 0, 3), prune_frequency=3)  # and then it runs


@pytest.mark.parametrize("sparsity", [1.0, 1.5])
def test_a_sparsity_of_one_gets_the_same_message_as_any_other_outside_the_range(sparsity):
    with pytest.raises(
        ConfigError, match=rf"--target-sparsity must be in \[0, 1\), got {sparsity}"
    ):
        CAAFPConfig(dataset="uci_har", target_sparsity=sparsity)


def test_clusters_auto_and_its_options():
    config = CAAFPConfig("uci_har", clusters="auto")
    assert (config.clusters, config.max_clusters, config.cluster_signal) == ("auto", 8, "update")
    assert config.recorded()["clusters"] == "auto"
    split_merge = {"recluster_every", "split_threshold", "merge_threshold", "split_guard"}
    no_noise = {"cluster_signal_clip"}  # read only with --cluster-signal-noise
    assert config.unused_fields() == split_merge | no_noise  # split_merge: with --recluster
    assert CAAFPConfig("uci_har").unused_fields() == {"max_clusters", *split_merge, *no_noise}
    assert GlobalFTConfig("uci_har").unused_fields() == {
        "max_clusters",
        "cluster_signal",
        "cluster_signal_noise",
        "cluster_signal_clip",
        *split_merge,
    }
    noisy = CAAFPConfig("uci_har", cluster_signal_noise=0.5, cluster_signal_clip=1.0)
    assert noisy.unused_fields() == {"max_clusters", *split_merge}
    labels = CAAFPConfig("uci_har", clusters=3, cluster_signal="labels")
    assert labels.cluster_signal == "labels"
    # a run made before these options existed resumes: they hold the values it used
    assert CAAFPConfig.ADDED_LATER["max_clusters"] == 8
    assert CAAFPConfig.ADDED_LATER["cluster_signal"] == "update"


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(clusters=0), "--clusters must be an integer K >= 1 or auto, got 0"),
        (dict(clusters="three"), "--clusters must be an integer K >= 1 or auto, got 'three'"),
        (dict(clusters=True), "--clusters must be an integer K >= 1 or auto"),
        (dict(clusters=2**31), "--clusters must be at most 2147483647"),
        (dict(clusters="auto", max_clusters=1), "--max-clusters must be an integer >= 2, got 1"),
        (dict(cluster_signal="gradients"), "--cluster-signal must be one of update, labels"),
        (
            dict(cluster_signal_noise=1.0),
            "--cluster-signal-noise needs --cluster-signal-clip (the L2 norm each upload",
        ),
        (dict(cluster_signal_noise=-1.0), "--cluster-signal-noise must be"),
        (dict(cluster_signal_noise=1.0, cluster_signal_clip=0.0), "--cluster-signal-clip must"),
        (
            dict(clusters="auto", clients_per_round=4, phases=(0, 1, 0)),
            "--clients-per-round 4 is below --max-clusters 8: every Phase 2-3 round trains at "
            "least one client per cluster; give --clients-per-round 8 or more, or "
            "--max-clusters 4 or less",
        ),
    ],
)
def test_bad_cluster_options_name_the_option(change, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        CAAFPConfig(**{"dataset": "uci_har", **change})


def test_max_clusters_is_only_checked_with_auto():
    # unused (and left out of the checks) with a fixed K; the command line refuses it as unused
    assert CAAFPConfig("uci_har", clusters=3, max_clusters=1).clusters == 3
    assert CAAFPConfig("uci_har", clusters="auto", clients_per_round=4, max_clusters=4)


def test_the_budget_defaults_to_the_papers_global_ranking_and_to_layerwise_for_filters():
    from fedprune.configs.pipeline import CAAFPConfig

    assert CAAFPConfig("uci_har").budget == "global"
    assert CAAFPConfig("uci_har", structure="filters").budget == "layerwise"
    assert CAAFPConfig("uci_har", structure="filters", budget="global").budget == "global"
    assert CAAFPConfig("uci_har", structure="filters").recorded()["budget"] == "layerwise"
