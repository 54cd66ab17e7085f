"""The Keras models of a finished run directory, per client, with the client's data."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import tensorflow as tf

from fedprune.data.partition import ClientData, FederatedData
from fedprune.data.registry import load_federated
from fedprune.errors import ConfigError, DataError
from fedprune.models.cnn1d import build_har_cnn
from fedprune.runs import CONFIG, RunDir


@dataclasses.dataclass(frozen=True)
class RunModels:
    """A run's configuration, data, and trainable weights of each client's deployed model.

    ``kernel_masks`` holds each client's pruning masks (CA-AFP runs), ``source`` says which
    models were taken (e.g. ``personal_ft25.npz``).
    """

    path: Path
    config: dict
    data: FederatedData
    weights: dict[int, list[np.ndarray]]
    source: str
    kernel_masks: dict[int, list[np.ndarray]] | None = None

    def sparsity(self, client_id: int) -> float:
        """Fraction of zeros over the client's kernels (rank > 1 weights)."""
        kernels = [w for w in self.weights[client_id] if w.ndim > 1]
        return 1.0 - sum(int(np.count_nonzero(k)) for k in kernels) / sum(k.size for k in kernels)

    def keras(self, client_id: int) -> tf.keras.Model:
        model = build_har_cnn(self.data.input_shape, self.data.num_classes)
        model.set_weights(self.weights[client_id])
        return model

    def client(self, client_id: int) -> ClientData:
        return self.data.client(client_id)


def load_run(
    path: str | Path, data_dir: str | Path | None = None, ft_epochs: int | None = None
) -> RunModels:
    """Read ``config.json`` and the final per-client models of a finished run.

    FedAvg runs deploy their global model to every client; CA-AFP, its baselines and ClusterFL
    deploy each client's personal model after ``ft_epochs`` epochs of fine-tuning (default:
    the longest the run has).
    """
    path = Path(path)
    if not (path / CONFIG).exists():
        raise DataError(f"{path} is not a fedprune run directory (no {CONFIG})")
    config = json.loads((path / CONFIG).read_text())
    run = RunDir(path, config)
    if not run.finished:
        raise DataError(f"{path}: the run has not finished (no summary.json); run it to the end")
    checkpoint = run.load_checkpoint()
    if checkpoint is None:
        raise DataError(f"{path}: checkpoint.npz is missing")
    _, arrays, _ = checkpoint
    data = load_federated(
        config["dataset"], config["seed"], data_dir, config.get("standardize", False)
    )
    method = config.get("method")
    if method == "fedavg":
        shared = [np.asarray(a) for a in arrays["trainable"]]
        weights = {c.client_id: shared for c in data.clients}
        return RunModels(path, config, data, weights, "checkpoint.npz (global model)")
    if "ft_epochs" in config:  # CA-AFP, its baselines, ClusterFL: fine-tuned personal models
        return _personal_models(path, config, data, ft_epochs)
    raise ConfigError(f"{path}: runs of method {method!r} cannot be exported yet")


def _personal_models(
    path: Path, config: dict, data: FederatedData, ft_epochs: int | None
) -> RunModels:
    available = sorted(int(e) for e in config["ft_epochs"])
    e = max(available) if ft_epochs is None else ft_epochs
    if e not in available:
        raise ConfigError(f"{path}: no personal models after {e} epochs; the run has {available}")
    with np.load(path / f"personal_ft{e}.npz", allow_pickle=False) as personal:
        n_weights = sum(
            1 for k in personal.files if k.startswith(f"client{data.clients[0].client_id}_")
        )
        weights = {
            c.client_id: [personal[f"client{c.client_id}_{i}"] for i in range(n_weights)]
            for c in data.clients
        }
    kernel_masks = None
    if (path / "masks.npz").exists():  # pruned methods: each client's cluster mask
        clusters = json.loads((path / "clusters.json").read_text())
        with np.load(path / "masks.npz", allow_pickle=False) as masks:
            n_kernels = sum(1 for k in masks.files if k.startswith("cluster0_"))
            kernel_masks = {
                c.client_id: [
                    masks[f"cluster{clusters[str(c.client_id)]}_{i}"].astype(np.float32)
                    for i in range(n_kernels)
                ]
                for c in data.clients
            }
    return RunModels(path, config, data, weights, f"personal_ft{e}.npz", kernel_masks)


def select_clients(run: RunModels, spec: str) -> list[int]:
    """Client ids from ``all`` or a comma-separated list; unknown ids are an error."""
    if spec == "all":
        return sorted(run.weights)
    try:
        ids = [int(s) for s in spec.split(",") if s.strip()]
    except ValueError:
        raise ConfigError(f"--clients must be 'all' or comma-separated ids, got {spec!r}") from None
    for i in ids:
        run.client(i)  # raises with the list of valid ids
    return ids
