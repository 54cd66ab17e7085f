"""The human end-of-run summary (:mod:`fedprune.runs.report`) and the finished-run answer
that needs no training (:func:`fedprune.runs.finished.finished_as_configured`)."""

from __future__ import annotations

import json

from fedprune.configs.fedavg import FedAvgConfig
from fedprune.configs.pipeline import CAAFPConfig
from fedprune.runs.finished import finished_as_configured
from fedprune.runs.report import describe, headline_lines


def test_the_headline_numbers_come_with_their_names_and_units():
    summary = {
        "method": "caafp",
        "dataset": "uci_har",
        "seed": 0,
        "clusters": {"0": 20, "1": 6, "2": 4},
        "sparsity": 0.7,
        "comm_mb_payload": 123.456,
        "wall_s": 139.4,
        "finetune": {
            "25": {"avg_acc": 0.95, "fairness": 0.031, "client_acc": {"1": 0.9}},
            "3": {"avg_acc": 0.9412, "fairness": 0.04, "client_acc": {"1": 0.9}},
        },
    }
    lines = dict(headline_lines(summary))
    assert list(lines)[:2] == [
        "personal accuracy after 3 fine-tuning epochs",
        "personal accuracy after 25 fine-tuning epochs",
    ]
    assert lines["personal accuracy after 3 fine-tuning epochs"] == "94.12 % (fairness 4.00 pp)"
    assert lines["clusters"] == "3 (clients per cluster: 20/6/4)"
    chosen = dict(headline_lines({**summary, "clusters_chosen": 3}))  # --clusters auto
    assert chosen["clusters (chosen from the data)"] == "3 (clients per cluster: 20/6/4)"
    assert lines["sparsity of the personal models"] == "70.00 %"
    assert lines["communication (bytes sent)"] == "123.5 MB"


def test_the_summary_names_the_files_and_the_next_commands(tmp_path):
    (tmp_path / "summary.json").write_text("{}")
    (tmp_path / "tensorboard").mkdir()
    summary = {"method": "fedavg", "dataset": "wisdm", "wall_s": 3725, "deploy": {}}
    text = describe(summary, tmp_path)
    first, *rest = text.splitlines()
    assert first == "fedavg on wisdm: finished in 1 h 02 min"
    assert f"Files in {tmp_path}: summary.json, tensorboard/" in rest
    assert f"  fedprune plot {tmp_path}" in "\n".join(rest)
    assert f"  edge-export {tmp_path} --formats float32,int8 --out export/{tmp_path.name}" in rest
    assert "edge-export" not in describe({"method": "fedhire"}, tmp_path)  # nothing to export
    # a clustering run's assigner has one format: the hint offers no --formats
    assigner = describe({"method": "kfed", "deploy": {"kind": "assigner"}}, tmp_path)
    assert f"  edge-export {tmp_path} --out export/{tmp_path.name}" in assigner.splitlines()


def _finished(path, config):
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config.record_in(path)))
    (path / "summary.json").write_text(json.dumps({"method": config.method, "avg_acc": 0.5}))


def test_a_finished_run_of_the_same_configuration_answers_without_training(tmp_path):
    config = CAAFPConfig(dataset="uci_har", phases=(0, 0, 3), prune_frequency=1)
    _finished(tmp_path / "run", config)
    assert finished_as_configured(config, tmp_path / "run") == {"method": "caafp", "avg_acc": 0.5}
    other = CAAFPConfig(dataset="uci_har", phases=(0, 0, 4), prune_frequency=1)
    assert finished_as_configured(other, tmp_path / "run") is None  # the trainer refuses it
    (tmp_path / "run" / "summary.json").unlink()
    assert finished_as_configured(config, tmp_path / "run") is None  # to be resumed


def test_the_record_settles_the_protocol_as_the_trainer_does(tmp_path):
    # a run made before --split existed recorded none: it used the random split and resumes
    config = FedAvgConfig(dataset="uci_har")
    old = {k: v for k, v in json.loads(json.dumps(config.record_in(tmp_path / "x"))).items()}
    old.pop("split")
    old.pop("classes_per_client")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "config.json").write_text(json.dumps(old))
    (tmp_path / "old" / "summary.json").write_text("{}")
    assert finished_as_configured(config, tmp_path / "old") == {}
