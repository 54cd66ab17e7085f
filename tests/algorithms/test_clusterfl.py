import numpy as np
import pytest

from fedprune.algorithms.clusterfl import (
    cluster_step,
    indicator,
    omega_step,
    run_clusterfl,
)
from fedprune.configs.clusterfl import ClusterFLConfig
from fedprune.errors import ConfigError


def test_indicator_is_orthonormal():
    f = indicator(np.array([0, 0, 1, 2, 1]), 3)
    np.testing.assert_allclose(f.T @ f, np.eye(3), atol=1e-12)


def test_omega_step_solves_the_normal_equations():
    rng = np.random.default_rng(0)
    w, u = rng.normal(size=(5, 7)), rng.normal(size=(5, 7))
    f = indicator(np.array([0, 0, 1, 1, 1]), 2)
    rho, alpha, beta = 5e-3, 1e-3, 5e-4
    omega = omega_step(w, u, f, rho, alpha, beta)
    # gradient of alpha tr(OO^T) - beta tr(F^T O O^T F) + rho/2 ||W + U - O||² is zero
    grad = 2 * alpha * omega - 2 * beta * f @ f.T @ omega - rho * (w + u - omega)
    np.testing.assert_allclose(grad, 0, atol=1e-12)


def test_cluster_step_finds_planted_groups():
    rng = np.random.default_rng(1)
    centers = rng.normal(size=(3, 20)) * 5
    omega = np.concatenate([c + 0.1 * rng.normal(size=(4, 20)) for c in centers])
    labels, f = cluster_step(omega, 3, seed=0)
    assert labels.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    np.testing.assert_allclose(f.T @ f, np.eye(3), atol=1e-12)


def test_bad_parameters():
    with pytest.raises(ConfigError):
        ClusterFLConfig("uci_har", rho=0.0)
    with pytest.raises(ConfigError, match="Omega step"):
        ClusterFLConfig("uci_har", rho=1e-3, alpha=0.0, beta=1e-3)


@pytest.mark.slow
def test_tiny_run(tff_context, tmp_path, fixture_data_dir):
    config = ClusterFLConfig(
        "uci_har", rounds=2, clusters=2, clients_per_round=3, local_epochs=1, ft_epochs=(1,)
    )
    summary = run_clusterfl(config, tmp_path / "run", fixture_data_dir, progress=False)
    again = run_clusterfl(config, tmp_path / "run", fixture_data_dir, progress=False)
    assert again == summary
    assert summary["sparsity"] == 0.0 and sum(summary["clusters"].values()) == 6
    per_transfer = 89_254 * 4 / 1e6
    assert summary["comm_mb_eq13"] == pytest.approx(2 * 3 * 2 * per_transfer)
    client_acc = list(summary["finetune"]["1"]["client_acc"].values())
    assert len(client_acc) == 6
    assert summary["finetune"]["1"]["avg_acc"] == pytest.approx(np.mean(client_acc))
    assert summary["finetune"]["1"]["fairness"] == pytest.approx(np.std(client_acc))
