"""The ``deploy`` manifest in ``summary.json``: what a finished run ships to devices.

``edge-export`` (and anything else deploying a run) reads this manifest instead of knowing
how each method lays out its files:

* ``kind``: ``global`` (one model for every client, FedAvg), ``personal`` (one model per
  client after fine-tuning: CA-AFP, its baselines, ClusterFL), ``clustered`` (each client
  gets its cluster's model: AS-CFL, CFL, CFL with a fixed K, IFCA) or ``community``
  (FedCRef's community autoencoders);
* kind ``assigner``: a clustering run's (Fed-HIRE, k-FED, federated k-means) state that
  labels a new sample of each client, ``assigner.npz`` (``labels`` ``None``);
* ``models``: the file holding them, per fine-tuning length for ``personal``
  (``{"3": "personal_ft3.npz", ...}``); ``global`` models are the ``trainable`` weights of
  ``checkpoint.npz``, ``clustered`` ones each cluster's trainable weights in
  ``cluster_models.npz``;
* ``masks`` / ``clusters``: the pruned methods' kernel masks per cluster and each client's
  cluster (``None`` for dense methods; a ``clustered`` run always names ``clusters.json``);
* ``model``: the :mod:`fedprune.models.table` entry that rebuilds the architecture;
  ``input_shape``, ``labels`` (class names; ``None`` for autoencoders);
* ``normalization``: what was applied to raw inputs before the model, in words;
* ``data``: the recipe that loads the clients' data again (keyword arguments of
  :func:`fedprune.data.registry.load_recorded`), for calibration and checks on the device
  side.

A ``summary.json`` without a manifest gets one derived from the run's ``config.json`` by
:func:`legacy_manifest` (HAR runs of FedAvg, the pipeline methods and ClusterFL; FedCRef);
anything else is refused in one line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from fedprune.checks import is_user_file
from fedprune.errors import DataError
from fedprune.runs import names
from fedprune.runs.files import damaged

KINDS = ("global", "personal", "clustered", "community", "assigner")


@dataclasses.dataclass(frozen=True)
class DeployManifest:
    kind: str
    models: str | dict[str, str]
    model: str
    input_shape: tuple[int, ...]
    labels: tuple[str, ...] | None
    normalization: str
    data: dict
    masks: str | None = None
    clusters: str | None = None

    def to_json(self) -> dict:
        value = dataclasses.asdict(self)
        value["input_shape"] = list(self.input_shape)
        value["labels"] = list(self.labels) if self.labels is not None else None
        return value

    @classmethod
    def from_json(cls, value: Mapping, where: Path) -> DeployManifest:
        """The manifest stored in ``where`` (a ``summary.json``); anything that does not
        describe one is a :class:`DataError` naming the file."""
        fields = {f.name for f in dataclasses.fields(cls)}
        required = {f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING}
        if not isinstance(value, Mapping) or not required <= set(value):
            raise DataError(f"{where}: the deploy manifest is incomplete; re-run training")
        value = {k: v for k, v in value.items() if k in fields}
        if value["kind"] not in KINDS:
            raise DataError(f"{where}: unknown deploy kind {value['kind']!r}; re-run training")
        try:
            models = value["models"]
            if value["kind"] == "personal":
                if not isinstance(models, Mapping):
                    raise ValueError("personal models are not a map of epochs to files")
                models = {str(int(e)): str(f) for e, f in models.items()}
            elif not isinstance(models, str):
                raise ValueError("models is not a file name")
            if value["kind"] == "clustered" and not isinstance(value.get("clusters"), str):
                raise ValueError("a clustered run's manifest names no clusters file")
            if not isinstance(value["data"], Mapping):
                raise ValueError("data is not a recipe")
            labels = value["labels"]
            return cls(
                **{
                    **value,
                    "models": models,
                    "input_shape": tuple(int(d) for d in value["input_shape"]),
                    "labels": tuple(str(n) for n in labels) if labels is not None else None,
                    "data": dict(value["data"]),
                }
            )
        except (TypeError, ValueError) as err:
            raise damaged(where, ValueError(f"deploy manifest: {err}")) from None

    def personal_file(self, epochs: int | None) -> tuple[int | None, str | None]:
        """(epochs, file) of the personal models after ``epochs`` of fine-tuning (default:
        the longest); ``(None, None)`` when no length is given and the manifest lists none."""
        if not isinstance(self.models, dict):
            raise TypeError(f"a {self.kind!r} manifest has no personal models")
        available = sorted(int(e) for e in self.models)
        if epochs is None and not available:
            return None, None
        chosen = max(available) if epochs is None else epochs
        return chosen, self.models.get(str(chosen), names.personal_file(chosen))


def har_manifest(
    kind: str,
    data: Mapping,
    input_shape: tuple[int, ...],
    labels: tuple[str, ...],
    ft_epochs: tuple[int, ...] = (),
    pruned: bool = False,
    clustered: bool = False,
    model: str = "har_cnn",
) -> DeployManifest:
    """The manifest of a HAR classifier run (``data``: the recipe of
    :func:`fedprune.data.registry.load_recorded`; ``model``: the table model, or
    ``user:<name>`` for your own, whose architecture is the run's ``model.json``)."""
    models: str | dict[str, str] = (
        {str(e): names.personal_file(e) for e in ft_epochs}
        if kind == "personal"
        else names.CHECKPOINT
    )
    return DeployManifest(
        kind=kind,
        models=models,
        model=model,
        input_shape=tuple(input_shape),
        labels=tuple(labels),
        normalization=(
            "z-score per channel with the client's training-window mean and std"
            if data.get("standardize")
            else "none (raw sensor values)"
        ),
        data=dict(data),
        masks=names.MASKS if pruned else None,
        clusters=names.CLUSTERS if clustered else None,
    )


def image_manifest(
    data: Mapping,
    input_shape: tuple[int, ...],
    labels: tuple[str, ...],
    model: str,
) -> DeployManifest:
    """The manifest of a clustered image run (AS-CFL, CFL, CFL with a fixed K, IFCA): each
    client deploys its cluster's final model (``cluster_models.npz``, the client's cluster in
    ``clusters.json``). ``data``: the recipe of
    :func:`fedprune.data.registry.rotated_images_recipe`; ``model``: the table model, or
    ``user:<name>`` for your own (the run's ``model.json``)."""
    return DeployManifest(
        kind="clustered",
        models=names.CLUSTER_MODELS,
        model=model,
        input_shape=tuple(input_shape),
        labels=tuple(labels),
        normalization=(
            "none (your images' values as given)"
            if is_user_file(str(data.get("dataset", "")))
            else "grey pixels scaled to [0, 1] (uint8 value / 255), one channel"
        ),
        data=dict(data),
        clusters=names.CLUSTERS,
    )


LEGACY_HAR_DATASETS: dict[str, tuple[tuple[int, int], tuple[str, ...]]] = {
    "uci_har": (
        (128, 9),
        (
            "WALKING",
            "WALKING_UPSTAIRS",
            "WALKING_DOWNSTAIRS",
            "SITTING",
            "STANDING",
            "LAYING",
        ),
    ),
    "wisdm": ((200, 3), ("Walking", "Jogging", "Upstairs", "Downstairs", "Sitting", "Standing")),
}
"""(window shape, class names) of the datasets a run without a manifest can have trained on,
fixed here: such runs do not change when :mod:`fedprune.data` does (tests/runs/test_deploy.py
checks that they agree with it)."""


def legacy_manifest(path: Path, config: Mapping) -> DeployManifest:
    """The manifest of a run whose ``summary.json`` has none, from its ``config.json``."""
    method = config.get("method")
    hint = f"re-run training with this version to export {path}"
    if method == "fedcref":
        return DeployManifest(
            kind="community",
            models=names.COMMUNITY_MODELS,
            model="autoencoder",
            input_shape=(784,),
            labels=None,
            normalization="pixels scaled to [0, 1]",
            data=image_clients_recipe(config),
        )
    if method in CLUSTERED_IMAGE_METHODS:
        raise DataError(clustered_without_models(path, method))
    if method != "fedavg" and "ft_epochs" not in config:
        raise DataError(f"{path}: runs of method {method!r} cannot be exported; {hint}")
    missing = [key for key in ("dataset", "seed") if key not in config]
    if missing:
        raise damaged(path / names.CONFIG, KeyError(f"no {', '.join(missing)}"))
    if config["dataset"] not in LEGACY_HAR_DATASETS:
        raise DataError(
            f"{path / names.CONFIG}: unknown dataset {config['dataset']!r}; known: "
            f"{', '.join(LEGACY_HAR_DATASETS)}; {hint}"
        )
    shape, labels = LEGACY_HAR_DATASETS[config["dataset"]]
    data = {
        "loader": "har",
        "dataset": config["dataset"],
        "seed": config["seed"],
        "standardize": config.get("standardize", False),
        "split": config.get("split", "random"),  # runs before --split: the random split
    }
    if method == "fedavg":
        return har_manifest("global", data, shape, labels)
    # the pipeline methods and ClusterFL (their configurations list ft_epochs)
    try:
        epochs = tuple(int(e) for e in config["ft_epochs"])
    except (TypeError, ValueError):
        raise DataError(f"{path / names.CONFIG}: ft_epochs is not a list of numbers") from None
    pruned = (path / names.MASKS).exists()
    return har_manifest("personal", data, shape, labels, epochs, pruned, clustered=True)


# the methods whose runs deploy each cluster's model (their configurations' ``method``)
CLUSTERED_IMAGE_METHODS = ("ascfl", "cfl", "cfl-fixed", "ifca")


def clustered_without_models(path: Path, method: str) -> str:
    """Why a clustered image run without its cluster models has nothing to export, and
    what to do: a finished run directory answers at once, so only a new run (another
    ``--out``) keeps the models."""
    kept = [
        name
        for name in (names.CONFIG, names.METRICS, names.SUMMARY, names.CLUSTERS)
        if (path / name).exists()
    ]
    return (
        f"{path}: this {method} run holds no model weights ({', '.join(kept) or 'no files'}, no "
        f"{names.CLUSTER_MODELS}): fedprune versions before the clustered deploy manifest "
        "kept only each client's cluster and the run's numbers, so it has nothing to export; "
        "train it again with this version into a new --out (the same command with another "
        "--out), then export that run"
    )


IMAGE_CLIENT_FIELDS = ("dataset", "split", "num_clients", "samples_per_class", "overlap", "seed")


def image_clients_recipe(config: Mapping) -> dict:
    """The recipe that rebuilds a FedCRef run's clients (all their samples)."""
    recipe = {
        "loader": "image-clients",
        **{k: config[k] for k in IMAGE_CLIENT_FIELDS if k in config},
    }
    recipe["max_classes"] = config.get("max_classes")
    return recipe
