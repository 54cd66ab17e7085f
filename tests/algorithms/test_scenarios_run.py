"""Scenario options end to end (``--label-noise``, ``--classes-per-client``) on the fixture
data: recorded in config.json, the noisy clients named in summary.json with their accuracy,
a scenario run resumes to the uninterrupted result, and bad values are one line."""

import json

import numpy as np
import pytest

from fedprune.algorithms.fedavg import run_fedavg
from fedprune.algorithms.pipeline import run_method as run_caafp
from fedprune.configs.fedavg import FedAvgConfig
from fedprune.configs.pipeline import CAAFPConfig
from fedprune.data.registry import load_federated
from fedprune.errors import ConfigError
from tests.conftest import interrupted

pytestmark = pytest.mark.slow

SCENARIO = dict(label_noise=(0.5, 1.0), classes_per_client=2)


def test_the_loaded_data_has_k_classes_and_the_named_noisy_clients(fixture_data_dir):
    clean = load_federated("uci_har", 0, fixture_data_dir, verbose=False)
    data = load_federated("uci_har", 0, fixture_data_dir, verbose=False, **SCENARIO)
    assert len(data.noisy_clients) == 3  # round(0.5 * 6)
    for c in data.clients:
        assert len(np.unique(c.y_test)) == 2  # the two kept classes, both splits
        assert set(np.unique(c.y_train)) <= set(range(6))
    quiet = [c for c in data.clients if c.client_id not in data.noisy_clients]
    for c in quiet:  # the clean clients' training labels are their kept classes only
        assert set(np.unique(c.y_train)) == set(np.unique(c.y_test))
    assert sum(len(c.y_test) for c in data.clients) < sum(len(c.y_test) for c in clean.clients)


def test_fedavg_records_the_scenario_and_resumes_to_the_same_summary(
    tff_context, tmp_path, fixture_data_dir, monkeypatch
):
    config = FedAvgConfig("uci_har", rounds=2, clients_per_round=3, local_epochs=1, **SCENARIO)
    full = run_fedavg(config, tmp_path / "full", fixture_data_dir, progress=False)
    recorded = json.loads((tmp_path / "full" / "config.json").read_text())
    assert recorded["label_noise"] == [0.5, 1.0] and recorded["classes_per_client"] == 2
    noise = full["label_noise"]
    assert len(noise["clients"]) == 3
    accs = full["client_acc"]
    assert noise["noisy_acc"] == pytest.approx(np.mean([accs[str(c)] for c in noise["clients"]]))
    assert full["deploy"]["data"]["label_noise"] == [0.5, 1.0]

    def run():
        return run_fedavg(config, tmp_path / "resumed", fixture_data_dir, progress=False)

    interrupted(monkeypatch, run, after_round=1)
    resumed = run()
    assert {k: v for k, v in resumed.items() if k != "wall_s"} == {
        k: v for k, v in full.items() if k != "wall_s"
    }


def test_caafp_reports_noisy_and_clean_accuracy_per_fine_tuning_length(
    tff_context, tmp_path, fixture_data_dir
):
    config = CAAFPConfig(
        "uci_har",
        phases=(0, 0, 2),
        clusters=2,
        clients_per_round=4,
        local_epochs=1,
        prune_frequency=1,
        ft_epochs=(1,),
        label_noise=(0.5, 0.3),
    )
    summary = run_caafp(config, tmp_path / "run", fixture_data_dir, progress=False)
    entry = summary["finetune"]["1"]
    assert len(entry["label_noise"]["clients"]) == 3
    assert entry["label_noise"]["clients"] == summary["finetune"]["1"]["label_noise"]["clients"]


def test_bad_scenario_values_are_refused_in_one_line(tmp_path, fixture_data_dir):
    with pytest.raises(ConfigError, match=r"--label-noise must be"):
        FedAvgConfig("uci_har", label_noise=(0.0, 0.3))
    with pytest.raises(ConfigError, match=r"--classes-per-client must be an integer in \[1, 5\]"):
        load_federated("uci_har", 0, fixture_data_dir, verbose=False, classes_per_client=6)
