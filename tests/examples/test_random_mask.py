"""The example method of docs/adding-a-method.md runs through the command line like the
built-in ones: options generated from its configuration, a run directory, a summary."""

import json

import pytest

from fedprune import methods
from fedprune.cli import main
from tests.examples.random_mask import REGISTRY_ENTRY


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(methods.METHODS, REGISTRY_ENTRY.name, REGISTRY_ENTRY)


def test_its_options_come_from_its_configuration(registered, capsys):
    with pytest.raises(SystemExit) as done:
        main(["train", "random_mask", "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "--target-sparsity" in text and "--phases" in text and "(default: 0.7" in text


def test_a_bad_value_is_refused_by_its_configuration(registered, tmp_path, capsys):
    argv = ["train", "random_mask", "--dataset", "uci_har", "--target-sparsity", "1.5"]
    assert main([*argv, "--out", str(tmp_path / "run")]) == 2
    assert "--target-sparsity" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_it_trains_and_writes_a_run_directory(registered, tmp_path, fixture_data_dir):
    out = tmp_path / "run"
    argv = ["train", "random_mask", "--dataset", "uci_har", "--phases", "0,0,2"]
    argv += ["--clients-per-round", "4", "--local-epochs", "1", "--ft-epochs", "1"]
    argv += ["--data-dir", str(fixture_data_dir), "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    config = json.loads((out / "config.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    assert config["method"] == summary["method"] == "random_mask"
    assert summary["sparsity"] == pytest.approx(0.7, abs=0.01)
    assert summary["deploy"]["kind"] == "personal"
    assert main(argv) == 0  # finished: returned as it is
    assert json.loads((out / "summary.json").read_text()) == summary
