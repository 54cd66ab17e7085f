import json

import numpy as np
import pytest

from fedprune.algorithms.pipeline import run_method as run_caafp
from fedprune.configs.pipeline import CAAFPConfig
from fedprune.errors import ConfigError
from fedprune.runs import RunDir
from tests.conftest import interrupted

pytestmark = pytest.mark.slow

SETTINGS = dict(
    phases=(1, 1, 4),
    clusters=2,
    clients_per_round=4,
    local_epochs=1,
    start_sparsity=0.5,
    target_sparsity=0.7,
    prune_frequency=2,
    churn=0.05,
    ft_epochs=(1, 2),
)
CONFIG = CAAFPConfig("uci_har", **SETTINGS)


@pytest.fixture(scope="module")
def full_run(tff_context, tmp_path_factory, module_data_dir):
    """``CONFIG`` run once, uninterrupted, for the tests that read it: (summary, run folder)."""
    run = tmp_path_factory.mktemp("caafp") / "run"
    return run_caafp(CONFIG, run, module_data_dir, progress=False), run


def test_run_reaches_target_and_personal_models_respect_masks(full_run):
    summary, run = full_run
    assert (summary["method"], summary["dataset"], summary["seed"]) == ("caafp", "uci_har", 0)
    assert summary["params"] == 89_254 and summary["num_clients"] == 6
    assert summary["sparsity"] == pytest.approx(0.7, abs=0.01)
    by_kind = summary["comm_mb_eq13_by_kind"]
    assert summary["comm_mb_eq13"] == pytest.approx(sum(by_kind.values()))
    # Eq. 3's clustering: each of the 6 clients downloads the dense global model and uploads
    # its one-epoch update, 89,254 float32 parameters each way
    assert by_kind["clustering"] == pytest.approx(6 * 2 * 89_254 * 4 / 1e6)
    assert summary["wall_s"] > 0
    assert set(summary["finetune"]) == {"1", "2"}
    for result in summary["finetune"].values():
        client_acc = list(result["client_acc"].values())
        assert len(client_acc) == 6
        assert result["avg_acc"] == pytest.approx(np.mean(client_acc))
        assert result["fairness"] == pytest.approx(np.std(client_acc))  # population std
    clusters = json.loads((run / "clusters.json").read_text())
    assert sorted(clusters) == [str(i) for i in range(1, 7)]
    masks = np.load(run / "masks.npz")
    personal = np.load(run / "personal_ft2.npz")
    for cid, c in clusters.items():
        kernels = [personal[f"client{cid}_{i}"] for i in (0, 2, 4, 6)]
        for k, kernel in enumerate(kernels):
            mask = masks[f"cluster{c}_{k}"]
            assert np.all(kernel[mask == 0] == 0)
    rows = RunDir(run, json.loads((run / "config.json").read_text())).metrics_rows()
    assert [r["phase"] for r in rows][:2] == ["fedavg", "clustering"]
    sparsities = [float(r["sparsity"]) for r in rows if r["phase"] == "prune"]
    assert sparsities[-1] == pytest.approx(0.7, abs=0.01)
    assert float(rows[-1]["comm_mb_eq13"]) == pytest.approx(summary["comm_mb_eq13"])
    assert summary["comm_mb_payload"] < summary["comm_mb_eq13"] * 1.1


def test_prune_layers_dense_only(tff_context, tmp_path, fixture_data_dir):
    import dataclasses

    config = dataclasses.replace(CONFIG, prune_layers=("dense",))
    summary = run_caafp(config, tmp_path / "run", fixture_data_dir, progress=False)
    masks = np.load(tmp_path / "run" / "masks.npz")
    for c in ("0", "1"):  # kernels conv1, conv2, dense, probs: only dense has zeros
        kernels = [masks[f"cluster{c}_{i}"] for i in range(4)]
        assert [bool(np.all(k == 1)) for k in kernels] == [True, True, False, True]
        assert 1 - kernels[2].mean() == pytest.approx(0.7, abs=1e-3)
        assert summary["layer_sparsity"][c]["dense"] == pytest.approx(0.7, abs=1e-3)
        assert summary["layer_sparsity"][c]["probs"] == 0.0
    assert summary["prune_layers"] == ["dense"]
    assert summary["pruned_params"] == 65_536
    assert summary["sparsity_pruned_layers"] == pytest.approx(0.7, abs=1e-3)
    # "sparsity" stays over all conv and dense kernels
    share = 65_536 / summary["prunable_params"]
    assert summary["sparsity"] == pytest.approx(0.7 * share, abs=1e-3)


def test_resume_equals_uninterrupted(full_run, tmp_path, module_data_dir, monkeypatch):
    full, full_dir = full_run
    interrupted(  # inside Phase 3, after the first mask update
        monkeypatch,
        lambda: run_caafp(CONFIG, tmp_path / "resumed", module_data_dir, progress=False),
        after_round=4,
    )
    resumed = run_caafp(CONFIG, tmp_path / "resumed", module_data_dir, progress=False)
    for key in ("finetune", "sparsity", "comm_mb_eq13", "comm_mb_payload", "clusters"):
        assert resumed[key] == full[key], key
    a = np.load(full_dir / "masks.npz")
    b = np.load(tmp_path / "resumed" / "masks.npz")
    assert all(np.array_equal(a[k], b[k]) for k in a.files)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(alpha=0.5, beta=0.5, gamma=0.5), "must be 1"),
        (dict(alpha=0.5), "all of --alpha"),
        (dict(phases=(0, 0, 0)), "not all 0"),
        (dict(start_sparsity=1.0), r"--start-sparsity must be in \[0, 1\)"),
        (dict(prune_frequency=10), "--prune-frequency 10 is more than"),
    ],
)
def test_bad_parameters(change, message):
    with pytest.raises(ConfigError, match=message):
        CAAFPConfig("uci_har", **{**SETTINGS, **change})
