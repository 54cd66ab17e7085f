"""The Keras models of a finished run directory, per client, with the client's data.

Reading the run and its data imports no TensorFlow: the command line checks everything
before the heavy imports.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from edge_export.run_files import CLUSTERS, RETRAIN, RunFiles, parse_clients, read_run
from fedprune.data.partition import ClientData, FederatedData
from fedprune.data.registry import load_federated
from fedprune.errors import ConfigError, DataError

if TYPE_CHECKING:
    import tensorflow as tf


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
        """The client's model in Keras (imports TensorFlow)."""
        from fedprune.models.cnn1d import build_har_cnn

        model = build_har_cnn(self.data.input_shape, self.data.num_classes)
        try:
            model.set_weights(self.weights[client_id])
        except ValueError as err:  # another architecture's (or a damaged file's) weights
            file = self.path / self.source.split(" ")[0]
            reason = " ".join(str(err).split())
            raise DataError(
                f"{file}: its weights do not fit the {self.data.name} model ({reason}); "
                f"{RETRAIN}"
            ) from None
        return model

    def client(self, client_id: int) -> ClientData:
        return self.data.client(client_id)


def load_run(
    path: str | Path,
    data_dir: str | Path | None = None,
    ft_epochs: int | None = None,
    files: RunFiles | None = None,
) -> RunModels:
    """The final per-client models of a finished run, with the run's client data.

    FedAvg runs deploy their global model to every client; CA-AFP, its baselines and ClusterFL
    deploy each client's personal model after ``ft_epochs`` epochs of fine-tuning (default:
    the longest the run has). ``files`` are the run's files if already read
    (:func:`edge_export.run_files.read_run`); a missing or damaged file is a
    :class:`DataError` naming it. Imports no TensorFlow (only :meth:`RunModels.keras` does).
    """
    files = files if files is not None else read_run(path, ft_epochs)
    if files.fedcref:
        raise ConfigError(f"{files.path}: a FedCRef run; its autoencoders are exported apart")
    config = files.config
    data = load_federated(
        config["dataset"], config["seed"], data_dir, config.get("standardize", False)
    )
    if files.shared is not None:
        weights = {c.client_id: files.shared for c in data.clients}
        return RunModels(files.path, config, data, weights, files.source)
    personal = files.personal or {}
    lacking = [c.client_id for c in data.clients if c.client_id not in personal]
    if lacking:
        raise DataError(
            f"{files.path / files.source} has no model of client(s) {lacking}; pass the "
            f"--data-dir the run was trained on, or {RETRAIN}"
        )
    weights = {c.client_id: personal[c.client_id] for c in data.clients}
    kernel_masks = None
    if files.masks is not None and files.clusters is not None:
        unassigned = [c.client_id for c in data.clients if c.client_id not in files.clusters]
        if unassigned:
            raise DataError(
                f"{files.path / CLUSTERS} assigns no cluster to client(s) {unassigned}; {RETRAIN}"
            )
        kernel_masks = {
            c.client_id: [m.astype(np.float32) for m in files.masks[files.clusters[c.client_id]]]
            for c in data.clients
        }
    return RunModels(files.path, config, data, weights, files.source, kernel_masks)


def select_clients(run: RunModels, spec: str) -> list[int]:
    """Client ids from ``all`` or a comma-separated list; unknown ids are an error."""
    ids = parse_clients(spec)
    if ids is None:
        return sorted(run.weights)
    for i in ids:
        run.client(i)  # raises with the list of valid ids
    return ids
