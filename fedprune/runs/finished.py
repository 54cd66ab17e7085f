"""The reader's view of a finished run directory (nothing is created or changed).

:func:`open_finished` checks the directory, ``config.json`` and ``summary.json`` and returns a
:class:`FinishedRun` whose methods read the other files through
:mod:`fedprune.runs.artefacts`; every problem is one :class:`~fedprune.errors.DataError` naming
the file. Used by ``edge-export`` and ``fedprune reproduce``; imports no TensorFlow.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from fedprune.errors import DataError
from fedprune.runs import artefacts, names
from fedprune.runs.deploy import DeployManifest, legacy_manifest
from fedprune.runs.files import RETRAIN, damaged, read_json_object
from fedprune.runs.run_dir import read_metrics, resolved_own_files

HINT = "pass the folder of a finished fedprune run (the --out it was given)"


def read_run_config(path: str | Path) -> dict:
    """``config.json`` of the run directory ``path``, which must exist; the run's own data
    file as it is now in the folder (:func:`~fedprune.runs.run_dir.resolved_own_files`)."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path} is not a fedprune run directory (it does not exist); {HINT}")
    if not path.is_dir():
        raise DataError(f"{path} is not a fedprune run directory (it is a file); {HINT}")
    if not (path / names.CONFIG).exists():
        raise DataError(f"{path} is not a fedprune run directory (no {names.CONFIG}); {HINT}")
    return resolved_own_files(path, read_json_object(path / names.CONFIG))


@dataclasses.dataclass(frozen=True)
class FinishedRun:
    path: Path
    config: dict
    summary: dict

    @property
    def method(self) -> str | None:
        return self.config.get("method")

    @property
    def deploy(self) -> DeployManifest:
        """The run's deploy manifest (derived from ``config.json`` where ``summary.json`` has
        none)."""
        if "deploy" in self.summary:
            return DeployManifest.from_json(self.summary["deploy"], self.path / names.SUMMARY)
        return legacy_manifest(self.path, self.config)

    def metrics(self) -> list[dict]:
        return read_metrics(self.path / names.METRICS)

    def global_model(self) -> list[np.ndarray]:
        arrays = artefacts.read_checkpoint_arrays(self.path)
        if "trainable" not in arrays:
            raise damaged(self.path / names.CHECKPOINT, KeyError("no trainable weights"))
        return [np.asarray(a) for a in arrays["trainable"]]

    def personal_models(self, epochs: int | None = None) -> tuple[str, dict[int, list[np.ndarray]]]:
        """(file name, {client: weights}) after ``epochs`` of fine-tuning (default: the
        longest the run has); a missing length names the ones present."""
        chosen, file = self.deploy.personal_file(epochs)
        if chosen is None or not (self.path / file).exists():
            file = file or "personal_ft<E>.npz"
            present = artefacts.personal_epochs(self.path)
            option = f"--ft-epochs {epochs}" if epochs is not None else "the longest fine-tuning"
            have = (
                f"the run has personal models after {', '.join(map(str, present))} epochs: "
                "pass one of those with --ft-epochs"
                if present
                else f"the run has no personal_ft<E>.npz; {RETRAIN}"
            )
            raise DataError(f"{self.path / file} is missing ({option}); {have}")
        return file, artefacts.read_personal_models(self.path, chosen)

    def kernel_masks(self) -> tuple[dict[int, list[np.ndarray]], dict[int, int]] | None:
        """(masks per cluster, cluster per client) of a pruned run, else ``None``."""
        if self.deploy.masks is None:
            return None
        masks = artefacts.read_masks(self.path)
        clusters = artefacts.read_clusters(self.path)
        unknown = sorted(set(clusters.values()) - set(masks))
        if unknown:
            raise damaged(self.path / names.MASKS, KeyError(f"no masks of cluster(s) {unknown}"))
        return masks, clusters

    def community_models(self) -> list[list[np.ndarray]]:
        file = self.path / names.COMMUNITY_MODELS
        if not file.exists():
            missing = names.COMMUNITY_MODELS
            raise DataError(f"{self.path} is not a finished FedCRef run (no {missing}); {RETRAIN}")
        models = artefacts.read_community_models(self.path)
        if not models:
            raise DataError(f"{self.path}: the run found no community, nothing to export")
        return models


def is_finished(path: str | Path) -> bool:
    """Whether the run directory ``path`` holds a finished run (its ``summary.json``)."""
    return (Path(path) / names.SUMMARY).exists()


def finished_summary(path: str | Path) -> dict | None:
    """The ``summary.json`` of the run in ``path``; ``None`` while it has not finished (or
    started). Needs no ``config.json``: reproductions aggregate summaries only."""
    if not is_finished(path):
        return None
    return read_json_object(Path(path) / names.SUMMARY)


def open_finished(path: str | Path) -> FinishedRun:
    """The finished run in ``path``; one clear error if it is not one."""
    path = Path(path)
    config = read_run_config(path)
    if not is_finished(path):
        raise DataError(f"{path}: the run has not finished (no {names.SUMMARY}); run it to the end")
    summary = resolved_own_files(path, read_json_object(path / names.SUMMARY))
    if "seed" not in config:
        raise damaged(path / names.CONFIG, KeyError("no seed"))
    return FinishedRun(path, config, summary)


def finished_as_configured(config: object, path: str | Path) -> dict | None:
    """The ``summary.json`` of ``path`` where it holds a finished run of exactly ``config``
    (its ``config.json`` equals ``config.record_in(path)``, as resuming requires), else
    ``None``: then the run must be started, resumed or refused by its trainer. Imports no
    TensorFlow, so a finished run answers at once."""
    import json

    from fedprune.runs.run_dir import recorded_config

    if not is_finished(path):
        return None
    recorded = recorded_config(path)
    if recorded is None or recorded != json.loads(json.dumps(config.record_in(path))):
        return None
    return read_json_object(Path(path) / names.SUMMARY)
