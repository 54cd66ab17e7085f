""":class:`Result`: a finished run directory as Python objects.

It reads only what the run wrote (``summary.json``, the deploy manifest, the model, mask and
cluster files), so a result opened later with :func:`open_result` is the same as the one
:meth:`fedprune.api.trainer.Trainer.run` returned.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fedprune.errors import DataError
from fedprune.runs import artefacts, names
from fedprune.runs.files import damaged, read_npz
from fedprune.runs.finished import FinishedRun, open_finished

if TYPE_CHECKING:
    import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class Result:
    """A finished run in ``path``: what :meth:`Trainer.run` returns, and
    :func:`open_result` opens again later (from another process, or after the folder moved).
    Every property and method reads the run's own files, so nothing is held in memory.

    Attributes
    ----------
    path : Path
        The run directory.
    summary, config : dict
        ``summary.json`` and ``config.json`` as read (JSON: every key a ``str``, client ids
        and cluster numbers too, ``"25"`` for 25 fine-tuning epochs).
    """

    path: Path

    @property
    def run(self) -> FinishedRun:
        """The run's files (:class:`fedprune.runs.finished.FinishedRun`): what the other
        members read."""
        return open_finished(self.path)

    @property
    def summary(self) -> dict:
        """``summary.json``: the run's final numbers."""
        return self.run.summary

    @property
    def config(self) -> dict:
        """``config.json``: the configuration the run recorded."""
        return self.run.config

    def metrics(self) -> list[dict]:
        """``metrics.csv``: one dict per row (round, and cluster where the method has them),
        keyed by the column names, each value typed: an ``int`` where the cell is a whole
        number (``round``, ``cluster``, ``clients``), a ``float`` where it is another number
        (``train_loss``, ``sparsity``, ``nan``), ``None`` where it is empty (a value the
        row has not measured), else the ``str`` (``phase``)."""
        return [{key: _typed(value) for key, value in row.items()} for row in self.run.metrics()]

    def weights(self, ft_epochs: int | None = None) -> dict[int, list[np.ndarray]]:
        """Each client's deployed weights, by client id: its personal model after
        ``ft_epochs`` of fine-tuning (default: the longest) for methods that fine-tune, its
        cluster's final model for AS-CFL, CFL and IFCA, the global model for FedAvg."""
        run = self.run
        manifest = run.deploy
        if manifest.kind == "personal":
            return run.personal_models(ft_epochs)[1]
        if manifest.kind == "clustered":
            models = artefacts.read_cluster_models(self.path, str(manifest.models))
            clusters = artefacts.read_clusters(self.path)
            return {c: [w.copy() for w in models[k]] for c, k in sorted(clusters.items())}
        if manifest.kind == "global":
            shared = run.global_model()
            clients = self.summary.get("client_acc", {})
            return {int(c): [w.copy() for w in shared] for c in clients}
        raise DataError(
            f"{self.path}: a {manifest.kind!r} run has no per-client classifiers; read its "
            "own files (docs/api.md)"
        )

    def models(self, ft_epochs: int | None = None) -> dict[int, tf.keras.Model]:
        """Each client's deployed model in Keras (:meth:`weights` set into the run's model:
        the table model or your own, rebuilt from ``model.json``)."""
        from fedprune.models.spec import ModelSpec
        from fedprune.models.user import resolve

        manifest = self.run.deploy
        built = {}
        for client, weights in self.weights(ft_epochs).items():
            model = ModelSpec(
                tuple(manifest.input_shape),
                len(manifest.labels or ()),
                seed=0,
                model=resolve(manifest.model, None, self.path),
            ).keras()
            model.set_weights(weights)
            built[client] = model
        return built

    def masks(self) -> dict[int, list[np.ndarray]]:
        """The kernel masks per cluster (pruned runs; 1 keeps a weight), in the order of the
        model's prunable kernels (:mod:`fedprune.sparsity.layers`)."""
        found = self.run.kernel_masks()
        if found is None:
            raise DataError(f"{self.path}: the run is not pruned (no {names.MASKS})")
        return found[0]

    def assignments(self) -> dict[int, int] | dict[int, np.ndarray]:
        """The clusters the run found: each client's cluster for the clustered-FL and HAR
        methods (``clusters.json``), or, for the clustering methods, each client's objects'
        cluster labels, ``{client: labels}`` (FedCRef's ``assignments.npz``, Fed-HIRE's,
        k-FED's and federated k-means' ``labels.npz``), keyed by your client ids where you
        gave the data, else by client number."""
        if (self.path / names.CLUSTERS).exists():
            return artefacts.read_clusters(self.path)
        if (self.path / names.ASSIGNMENTS).exists():
            return self._by_client_id(artefacts.read_assignments(self.path))
        if (self.path / names.LABELS).exists():
            arrays = read_npz(self.path / names.LABELS)
            count = sum(1 for k in arrays if k.startswith("client"))
            try:
                labels = [arrays[f"client{i}"] for i in range(count)]
            except KeyError as err:
                raise damaged(self.path / names.LABELS, err) from None
            return self._by_client_id(labels)
        raise DataError(f"{self.path}: the run has no clusters (no {names.CLUSTERS})")

    def _by_client_id(self, per_client: list[np.ndarray]) -> dict[int, np.ndarray]:
        """Each client's array (the run's files list them in client order) by the client's
        own id: ``summary.json``'s ``client_ids`` where the run had your data, else 0 .. L-1."""
        ids = self.summary.get("client_ids", range(len(per_client)))
        if len(ids) != len(per_client):
            raise damaged(
                self.path / names.SUMMARY,
                ValueError(f"{len(ids)} client_ids for {len(per_client)} clients"),
            )
        return {int(cid): a for cid, a in zip(ids, per_client)}


def _typed(cell: str) -> int | float | str | None:
    """A ``metrics.csv`` cell as the number it writes (``int`` for a whole number in
    digits), ``None`` for an empty cell, else the text."""
    if cell == "":
        return None
    if re.fullmatch(r"[+-]?[0-9]+", cell):
        return int(cell)
    try:
        return float(cell)
    except ValueError:
        return cell


def open_result(path: str | os.PathLike) -> Result:
    """The finished run in ``path`` as a :class:`Result` (the same as the one
    :meth:`Trainer.run` returned); a :class:`DataError` naming what is missing if ``path`` is
    not a finished fedprune run directory (no ``config.json``, or no ``summary.json`` yet:
    run it, or resume it with the same call)."""
    open_finished(path)
    return Result(Path(path))
