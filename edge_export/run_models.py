"""The Keras models of a finished run directory, per client, with the client's data.

What is deployed comes from the run's ``deploy`` manifest (:mod:`fedprune.runs.deploy`), never
from its method: kind ``global`` gives the one global model to every client, ``personal`` each
client's model after ``--ft-epochs`` of fine-tuning (with its cluster's kernel masks when the
run was pruned), ``clustered`` (AS-CFL, CFL, IFCA) each client its cluster's final model;
``community`` runs (FedCRef's autoencoders) go to :mod:`edge_export.autoencoders`. The client
data is loaded again from the manifest's recipe
(:func:`fedprune.data.registry.load_recorded`), the architecture is rebuilt from the model
table (:mod:`fedprune.models.table`) with the manifest's input shape and labels, or, for a run
of your own model, from the run's ``model.json`` (:mod:`fedprune.models.user`).

Reading the run and its data imports no TensorFlow: the command line checks everything before
the heavy imports (only :meth:`RunModels.keras` imports it).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fedprune.data.partition import ClientData, FederatedData
from fedprune.data.registry import load_recorded
from fedprune.data.sources import sha256_of
from fedprune.errors import ConfigError, DataError
from fedprune.models.table import ModelEntry, model_entry
from fedprune.models.user import is_user_model
from fedprune.runs import artefacts, names
from fedprune.runs.deploy import DeployManifest
from fedprune.runs.files import RETRAIN, damaged
from fedprune.runs.finished import FinishedRun, open_finished

if TYPE_CHECKING:
    import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class DeployedWeights:
    """What a run deploys, read and checked before its data is loaded.

    Exactly one of ``shared`` (kind ``global``: every client's model) and ``personal`` (kinds
    ``personal`` and ``clustered``: by client id) is set. ``masks`` / ``clusters``: a pruned
    run's kernel masks per cluster and each client's cluster (a ``clustered`` run's clusters,
    without masks). ``source_file`` is the file the weights came from,
    ``source`` says so in words for the report (e.g. ``checkpoint.npz (global model)``).
    """

    run: FinishedRun
    manifest: DeployManifest
    source_file: str
    source: str
    shared: list[np.ndarray] | None = None
    personal: dict[int, list[np.ndarray]] | None = None
    masks: dict[int, list[np.ndarray]] | None = None
    clusters: dict[int, int] | None = None


def classifier_entry(run: FinishedRun, manifest: DeployManifest) -> ModelEntry | None:
    """The model table entry of a classifier run (``None`` for your own model, whose
    architecture file must be there); an unknown model (or an autoencoder) is a
    :class:`DataError` naming the file the manifest came from."""
    where = run.path / (names.SUMMARY if "deploy" in run.summary else names.CONFIG)
    if is_user_model(manifest.model):
        if not (run.path / names.MODEL_ARCHITECTURE).is_file():
            raise DataError(
                f"{run.path}: the run was trained with your model {manifest.model!r} but its "
                f"{names.MODEL_ARCHITECTURE} is missing; {RETRAIN}"
            )
        return None
    try:
        entry = model_entry(manifest.model)
    except ConfigError as err:
        raise DataError(f"{where}: {err}; re-run training with this version") from None
    if entry.task != "classification" or manifest.labels is None:
        raise DataError(
            f"{where}: model {manifest.model!r} of a {manifest.kind!r} run is not a classifier; "
            f"{RETRAIN}"
        )
    return entry


def read_deployed(run: FinishedRun, ft_epochs: int | None = None) -> DeployedWeights:
    """Read and check the deployed weights of ``run`` (no data, no TensorFlow).

    ``ft_epochs`` picks the personal models after that many fine-tuning epochs (default: the
    longest the run has); it is ignored for a ``global`` or ``clustered`` run. A missing or
    damaged file is a :class:`DataError` naming it.
    """
    manifest = run.deploy
    if manifest.kind == "community":
        raise ConfigError(f"{run.path}: a FedCRef run; its autoencoders are exported apart")
    classifier_entry(run, manifest)
    if manifest.kind == "clustered":
        return _cluster_models(run, manifest)
    if manifest.kind == "global":
        file = names.CHECKPOINT
        return DeployedWeights(
            run, manifest, file, f"{file} (global model)", shared=run.global_model()
        )
    file, personal = run.personal_models(ft_epochs)
    masks = run.kernel_masks()
    cluster_masks, clusters = masks if masks is not None else (None, None)
    return DeployedWeights(
        run, manifest, file, file, personal=personal, masks=cluster_masks, clusters=clusters
    )


def _cluster_models(run: FinishedRun, manifest: DeployManifest) -> DeployedWeights:
    """Each client's weights of a ``clustered`` run: its cluster's final model."""
    file = str(manifest.models)
    if not (run.path / file).exists():
        raise DataError(
            f"{run.path / file} is missing: the run's cluster models are gone (only training "
            "writes them); restore the file, or train again into a new --out and export that run"
        )
    models = artefacts.read_cluster_models(run.path, file)
    clusters = artefacts.read_clusters(run.path)
    unknown = sorted(set(clusters.values()) - set(models))
    if unknown:
        raise damaged(run.path / file, KeyError(f"no model of cluster(s) {unknown}"))
    personal = {client: models[cluster] for client, cluster in clusters.items()}
    source = f"{file} (each client's cluster's model, clusters in {names.CLUSTERS})"
    return DeployedWeights(run, manifest, file, source, personal=personal, clusters=clusters)


@dataclasses.dataclass(frozen=True)
class RunModels:
    """A run's configuration, data, and trainable weights of each client's deployed model.

    ``kernel_masks`` holds each client's pruning masks (pruned runs), ``source`` says which
    models were taken (e.g. ``personal_ft25.npz``) and ``manifest`` is the run's deploy
    manifest (model, input shape, labels, normalization).
    """

    path: Path
    config: dict
    manifest: DeployManifest
    data: FederatedData
    weights: dict[int, list[np.ndarray]]
    source: str
    source_file: str
    kernel_masks: dict[int, list[np.ndarray]] | None = None
    _compacted: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    @functools.cached_property
    def source_sha256(self) -> str:
        """The sha256 of the file the weights came from (``source_file``). Each exported
        file's record names it, so that an export of these weights can be told from one of
        an earlier run in the same folder (a run trained again)."""
        return sha256_of(self.path / self.source_file)

    @property
    def labels(self) -> tuple[str, ...]:
        """The class names of the model's outputs, in output order."""
        return tuple(self.manifest.labels or ())

    def sparsity(self, client_id: int) -> float:
        """Fraction of zeros over the client's prunable kernels (imports TensorFlow)."""
        from fedprune.sparsity.layers import prunable_mask_flags, select

        flags = prunable_mask_flags(self.keras(client_id))
        kernels = select(self.weights[client_id], flags)
        return 1.0 - sum(int(np.count_nonzero(k)) for k in kernels) / sum(k.size for k in kernels)

    def keras(self, client_id: int) -> tf.keras.Model:
        """The client's model in Keras (imports TensorFlow)."""
        from fedprune.models.spec import ModelSpec
        from fedprune.models.user import resolve

        model = ModelSpec(
            tuple(self.manifest.input_shape),
            len(self.labels),
            seed=0,
            model=resolve(self.manifest.model, None, self.path),
        ).keras()
        try:
            model.set_weights(self.weights[client_id])
        except ValueError as err:  # another architecture's (or a damaged file's) weights
            reason = " ".join(str(err).split())
            raise DataError(
                f"{self.path / self.source_file}: its weights do not fit the {self.data.name} "
                f"model ({reason}); {RETRAIN}"
            ) from None
        return model

    @property
    def structured(self) -> bool:
        """Whether the run's masks remove whole filters and units (``--structure filters``)."""
        return self.config.get("structure") == "filters" and self.kernel_masks is not None

    def deployable(self, client_id: int) -> tf.keras.Model:
        """The Keras model every format is converted from: :meth:`keras`, or for a
        ``--structure filters`` run the smaller model without the removed filters and units
        (:mod:`edge_export.compact`), checked to compute the masked model's probabilities
        (to 1e-5) on the client's test windows (imports TensorFlow)."""
        model = self.keras(client_id)
        if not self.structured:
            return model
        from edge_export.compact import MATCH, compact, max_difference

        smaller = compact(model, self.kernel_masks[client_id])
        gap = max_difference(model, smaller.model, self.client(client_id).x_test)
        if not gap <= MATCH:
            raise DataError(
                f"{self.path / self.source_file}: client {client_id}'s smaller model differs "
                f"from its masked model by {gap:.2g} (more than {MATCH:g}) on its test windows"
            )
        self._compacted[client_id] = smaller.record()
        return smaller.model

    def compaction(self, client_id: int) -> dict | None:
        """The kernel shapes and parameter counts before and after :meth:`deployable` made
        the client's model smaller (``None`` where it did not)."""
        return self._compacted.get(client_id)

    def client(self, client_id: int) -> ClientData:
        return self.data.client(client_id)


def load_run(
    path: str | Path,
    data_dir: str | Path | None = None,
    ft_epochs: int | None = None,
    deployed: DeployedWeights | None = None,
) -> RunModels:
    """The final per-client models of a finished run, with the run's client data.

    ``deployed`` are the run's weights if already read (:func:`read_deployed`); a missing or
    damaged file is a :class:`DataError` naming it, and so is data that does not match the
    run (other clients, another window shape). Imports no TensorFlow.
    """
    deployed = deployed if deployed is not None else read_deployed(open_finished(path), ft_epochs)
    run, manifest = deployed.run, deployed.manifest
    data = load_recorded(manifest.data, data_dir)
    if not isinstance(data, FederatedData):
        raise DataError(
            f"{run.path}: its data recipe does not give classifier clients (HAR windows or "
            f"images); {RETRAIN}"
        )
    if tuple(data.input_shape) != tuple(manifest.input_shape):
        raise DataError(
            f"{run.path}: the run's model takes {manifest.input_shape} inputs, the data "
            f"{tuple(data.input_shape)}; pass the --data-dir the run was trained on"
        )
    if manifest.labels is not None and tuple(data.class_names) != tuple(manifest.labels):
        raise DataError(
            f"{run.path}: the run's model predicts {list(manifest.labels)}, the data has "
            f"classes {list(data.class_names)}; pass the --data-dir the run was trained on"
        )
    common = (run.path, run.config, manifest, data)
    if deployed.shared is not None:
        weights = {c.client_id: deployed.shared for c in data.clients}
        return RunModels(*common, weights, deployed.source, deployed.source_file)
    personal = deployed.personal or {}
    lacking = [c.client_id for c in data.clients if c.client_id not in personal]
    if lacking and manifest.kind == "clustered":
        raise DataError(
            f"{run.path / names.CLUSTERS} assigns no cluster to client(s) {lacking}; pass the "
            "--data-dir the run was trained on"
        )
    if lacking:
        raise DataError(
            f"{run.path / deployed.source_file} has no model of client(s) {lacking}; pass the "
            f"--data-dir the run was trained on, or {RETRAIN}"
        )
    weights = {c.client_id: personal[c.client_id] for c in data.clients}
    kernel_masks = None
    if deployed.masks is not None and deployed.clusters is not None:
        unassigned = [c.client_id for c in data.clients if c.client_id not in deployed.clusters]
        if unassigned:
            raise DataError(
                f"{run.path / names.CLUSTERS} assigns no cluster to client(s) {unassigned}; "
                f"{RETRAIN}"
            )
        kernel_masks = {
            c.client_id: [
                m.astype(np.float32) for m in deployed.masks[deployed.clusters[c.client_id]]
            ]
            for c in data.clients
        }
    return RunModels(*common, weights, deployed.source, deployed.source_file, kernel_masks)


def parse_clients(spec: str) -> list[int] | None:
    """Client ids of ``--clients`` (``None`` for ``all``); a malformed list is an error."""
    if spec == "all":
        return None
    try:
        ids = [int(s) for s in spec.split(",") if s.strip()]
    except ValueError:
        raise ConfigError(f"--clients must be 'all' or comma-separated ids, got {spec!r}") from None
    if not ids:
        raise ConfigError(f"--clients must be 'all' or comma-separated ids, got {spec!r}")
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ConfigError(
            f"--clients names client {', '.join(map(str, repeated))} more than once ({spec!r}); "
            "list each client once"
        )
    return ids


def select_clients(run: RunModels, spec: str) -> list[int]:
    """Client ids from ``all`` or a comma-separated list; unknown ids are an error."""
    ids = parse_clients(spec)
    if ids is None:
        return sorted(run.weights)
    for i in ids:
        run.client(i)  # raises with the list of valid ids
    return ids
