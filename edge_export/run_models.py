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
    """A run's configuration, data, and trainable weights of each client's deployed model."""

    path: Path
    config: dict
    data: FederatedData
    weights: dict[int, list[np.ndarray]]

    def keras(self, client_id: int) -> tf.keras.Model:
        model = build_har_cnn(self.data.input_shape, self.data.num_classes)
        model.set_weights(self.weights[client_id])
        return model

    def client(self, client_id: int) -> ClientData:
        return self.data.client(client_id)


def load_run(path: str | Path, data_dir: str | Path | None = None) -> RunModels:
    """Read ``config.json`` and the final weights of a finished run.

    FedAvg runs deploy their global model to every client.
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
    if config.get("method") != "fedavg":
        raise ConfigError(f"{path}: method {config.get('method')!r} cannot be exported yet")
    shared = [np.asarray(a) for a in arrays["trainable"]]
    return RunModels(path, config, data, {c.client_id: shared for c in data.clients})


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
