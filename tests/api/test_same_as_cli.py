"""The API and the command line give the same run: for one dataset of each method family, the
same options through ``fedprune train`` and through the builder give the same
``summary.json``, wall and CPU times aside."""

from __future__ import annotations

import json

import pytest

import fedprune as fp
from fedprune.cli import main
from fedprune.data import images, wisdm
from fedprune.errors import DataError
from tests.algorithms.fedhire.test_run import _blobs_ecoli
from tests.algorithms.test_fedcref_run import pattern_images
from tests.conftest import wisdm_text
from tests.data.test_images import write_idx_pair
from tests.test_same_results import _without_timing, write_data

CASES = {
    "clusterfl-wisdm": (
        "clusterfl",
        "wisdm",
        ["--rounds", "1", "--clusters", "2", "--clients-per-round", "2", "--ft-epochs", "1",
         "--local-epochs", "1"],
        dict(rounds=1, clusters=2, clients_per_round=2, ft_epochs=(1,), local_epochs=1),
    ),
    "fedavg-uci_har": (
        "fedavg",
        "uci_har",
        ["--rounds", "2", "--clients-per-round", "3", "--local-epochs", "1"],
        dict(rounds=2, clients_per_round=3, local_epochs=1),
    ),
    "caafp-uci_har": (
        "caafp",
        "uci_har",
        ["--phases", "0,1,2", "--clusters", "2", "--clients-per-round", "3",
         "--prune-frequency", "1", "--ft-epochs", "1", "--local-epochs", "1"],
        dict(phases=(0, 1, 2), clusters=2, clients_per_round=3, prune_frequency=1,
             ft_epochs=(1,), local_epochs=1),
    ),
    "ifca-mnist": (
        "ifca",
        "mnist",
        ["--clients", "4", "--rounds", "2", "--clusters", "2", "--proxy-size", "20",
         "--batch-size", "16", "--min-frac", "0.5", "--max-frac", "1.0"],
        dict(num_clients=4, rounds=2, clusters=2, proxy_size=20, batch_size=16, min_frac=0.5,
             max_frac=1.0),
    ),
    "fedcref-mnist": (
        "fedcref",
        "mnist",
        ["--clients", "4", "--samples-per-class", "10", "--epochs", "2", "--fl-rounds", "1",
         "--max-iterations", "1", "--batch-size", "8"],
        dict(num_clients=4, samples_per_class=10, local_epochs=2, fl_rounds=1, max_iterations=1,
             batch_size=8),
    ),
    "kfed-ecoli": (
        "kfed",
        "ecoli",
        ["--partition", "paper", "--clients", "3", "--k-star", "3"],
        dict(partition="paper", num_clients=3, k_star=3),
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = write_data(tmp_path_factory.mktemp("data"))
    (root / "wisdm").mkdir()
    (root / "wisdm" / wisdm.RAW_NAME).write_text(wisdm_text())
    x, y = pattern_images(per_class=30, classes=6, seed=1)
    write_idx_pair(root / "mnist", images.file_names("mnist", "test"), x, y)
    _blobs_ecoli(root)
    return root


def summary(path) -> dict:
    found = _without_timing(json.loads((path / "summary.json").read_text()))
    return {k: v for k, v in found.items() if k != "cpu_s"}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_api_and_cli_give_the_same_summary(case, data_dir, tmp_path):
    method, dataset, options, kwargs = CASES[case]
    cli_out, api_out = tmp_path / "cli", tmp_path / "api"
    args = ["train", method, "--dataset", dataset, *options, "--no-progress"]
    assert main([*args, "--data-dir", str(data_dir), "--out", str(cli_out)]) == 0
    result = fp.build(method, dataset, **kwargs).run(api_out, data_dir=data_dir, progress=False)
    assert json.loads((cli_out / "config.json").read_text()) == result.config
    assert summary(cli_out) == summary(api_out)
    if method == "fedavg":  # one global model: no clusters
        with pytest.raises(DataError, match="has no clusters"):
            result.assignments()
    else:
        found = result.summary.get("num_clients") or result.summary.get("clients")
        clients = found or result.config["num_clients"]
        assert len(result.assignments()) == clients
