"""Options generated from the configuration fields: names, help, parsing, defaults."""

import argparse

import pytest

from fedprune.configs.command_line import add_config_options, config_from_options
from fedprune.configs.fedcref import FedCRefRunConfig
from fedprune.configs.pipeline import CAAFPConfig, GlobalFTConfig
from fedprune.errors import ConfigError


def _parser(config_class) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="t", formatter_class=argparse.RawTextHelpFormatter)
    add_config_options(parser, config_class)
    return parser


def _build(config_class, argv):
    return config_from_options(config_class, _parser(config_class).parse_args(argv))


def test_tuples_lists_and_switches_are_parsed():
    config = _build(
        CAAFPConfig,
        ["--dataset", "wisdm", "--phases", "1,2,3", "--prune-layers", "probs, dense"]
        + ["--ft-epochs", "0,5", "--lr", "0.01", "--standardize", "--prune-frequency", "1"],
    )
    assert config.phases == (1, 2, 3) and config.prune_layers == ("dense", "probs")
    assert config.ft_epochs == (0, 5) and config.learning_rate == 0.01 and config.standardize


def test_unset_options_take_the_method_defaults():
    assert _build(GlobalFTConfig, ["--dataset", "uci_har"]) == GlobalFTConfig("uci_har")
    assert _build(GlobalFTConfig, ["--dataset", "uci_har"]).clusters == 1
    assert _build(FedCRefRunConfig, ["--clients", "4", "--epochs", "2"]) == FedCRefRunConfig(
        num_clients=4, local_epochs=2
    )


def test_clusters_auto_on_the_command_line():
    config = _build(CAAFPConfig, ["--dataset", "uci_har", "--clusters", "auto"])
    assert (config.clusters, config.max_clusters) == ("auto", 8)
    config = _build(
        CAAFPConfig,
        ["--dataset", "uci_har", "--clusters", "auto", "--max-clusters", "5"]
        + ["--cluster-signal", "labels"],
    )
    assert (config.clusters, config.max_clusters, config.cluster_signal) == ("auto", 5, "labels")
    assert _build(CAAFPConfig, ["--dataset", "uci_har", "--clusters", "4"]).clusters == 4
    assert _build(CAAFPConfig, ["--dataset", "uci_har"]).clusters == 3
    text = " ".join(_parser(CAAFPConfig).format_help().split())
    assert "--clusters {K,auto}" in text and "(default: 3; K >= 1 or auto)" in text
    assert "--max-clusters K" in text and "(default: 8; integer >= 2)" in text
    assert "--cluster-signal {update,labels}" in text


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--clusters", "0"], "--clusters must be an integer K >= 1 or auto, got 0"),
        (["--clusters", "auto", "--max-clusters", "1"], "--max-clusters must be an integer >= 2"),
        (
            ["--max-clusters", "5"],
            "--max-clusters: not used by this command with the options given; leave it out",
        ),
        (["--clusters", "1", "--cluster-signal", "labels"], "--cluster-signal: not used"),
    ],
)
def test_bad_cluster_options(argv, message):
    with pytest.raises(ConfigError, match=message):
        _build(CAAFPConfig, ["--dataset", "uci_har", *argv])


def test_clusters_that_are_no_number():
    with pytest.raises(SystemExit):
        _parser(CAAFPConfig).parse_args(["--dataset", "uci_har", "--clusters", "many"])


def test_help_shows_default_and_range():
    text = _parser(GlobalFTConfig).format_help()
    assert "(default: 1; K >= 1 or auto)" in " ".join(text.split())
    assert "client Adam learning rate (default: 0.001; (0, inf))" in text
    assert "(default: 0,0,50; T0,T1,T2 >= 0, not all 0)" in text
    assert "--budget {global,layerwise}" in text
    assert "(default: the paper's for the dataset; [0, 1])" in text
    fedcref = _parser(FedCRefRunConfig).format_help()
    assert "--max-classes MAX_CLASSES" in fedcref and "--stop-window" not in fedcref


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--phases", "1,2"], "expected 3 values"),
        (["--phases", "a,b,c"], "expected comma-separated integers"),
        (["--budget", "local"], "invalid choice"),
        (["--lr", "fast"], "invalid float value"),
    ],
)
def test_malformed_text_is_argparses_error(argv, fragment, capsys):
    with pytest.raises(SystemExit):
        _parser(CAAFPConfig).parse_args(["--dataset", "uci_har", *argv])
    assert fragment in capsys.readouterr().err


def test_an_option_the_configuration_does_not_use_is_an_error():
    assert _build(FedCRefRunConfig, ["--dirtiness", "0.2"]).dirtiness == 0.2  # --init dirty
    assert _build(FedCRefRunConfig, ["--init", "kmeans-ae"]).init == "kmeans-ae"
    with pytest.raises(ConfigError, match=r"^--dirtiness: not used by this command .* leave it"):
        _build(FedCRefRunConfig, ["--init", "kmeans-ae", "--dirtiness", "0.2"])


def test_every_option_of_every_method_sits_under_a_known_heading():
    from fedprune.configs.command_line import GROUP_OF, GROUPS, METHOD_GROUP, group_of
    from fedprune.configs.fields import cli_fields
    from fedprune.methods import METHODS

    assert set(GROUP_OF.values()) <= set(GROUPS)
    for entry in METHODS.values():
        for field in cli_fields(entry.config):
            assert group_of(field) in GROUPS, (entry.name, field.name)
    caafp = {f.name: group_of(f) for f in cli_fields(METHODS["caafp"].config)}
    assert caafp["alpha"] == caafp["target_sparsity"] == "pruning"  # the score weights
    assert caafp["clusters"] == METHOD_GROUP and caafp["dataset"] == "data"
    ascfl = {f.name: group_of(f) for f in cli_fields(METHODS["ascfl"].config)}
    assert ascfl["alpha"] == "data"  # there: the Dirichlet label skew


def test_help_shows_the_headings_in_order(capsys):
    import pytest

    from fedprune.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "caafp", "--help"])
    text = capsys.readouterr().out
    headings = ["data:", "federated training:", "the method's own options:", "pruning:"]
    headings += ["fine-tuning (personal models):", "watching the run:"]
    headings += ["data and run directory:", "TFF workers:", "output:"]
    positions = [text.index("\n" + h + "\n") for h in headings]
    assert positions == sorted(positions)
