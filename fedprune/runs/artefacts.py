"""Named writer/reader pairs for the artefacts a run leaves besides its checkpoint, metrics and
summary. Every module that writes or reads one of these files goes through here, so a file's
layout is defined once (the keys inside an ``.npz`` included).

Readers read the whole file now and turn a missing or damaged file into one
:class:`~fedprune.errors.DataError` naming it. Every array read back passes the one check
:func:`check_arrays` (numbers, finite, the same shapes for every client or cluster, masks
holding only 0 and 1), as ``checkpoint.npz`` does: a model with a nan is never fine-tuned,
exported or returned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from fedprune.runs import names
from fedprune.runs.files import (
    damaged,
    non_finite_place,
    numbered_arrays,
    numbered_groups,
    read_json,
    read_npz,
    write_json,
    write_npz,
)

Weights = list[np.ndarray]


def check_arrays(
    path: Path,
    named: Mapping[str, Sequence[np.ndarray]],
    *,
    same_shapes: bool = False,
    masks: bool = False,
) -> None:
    """The check of every array list read back from a run folder's ``path``: numbers only,
    every one finite; with ``same_shapes`` every list the shapes of the first (each client's
    or cluster's model is the same model); with ``masks`` only the values 0 and 1. Else one
    :class:`DataError` "``path`` is damaged (... in 'client 3' array 0 ...)"."""
    for name, arrays in named.items():
        for i, array in enumerate(arrays):
            if np.asarray(array).dtype.kind not in "biuf":
                problem = f"{name!r} array {i} holds {np.asarray(array).dtype} values, not numbers"
                raise damaged(path, ValueError(problem))
    bad = non_finite_place(named)
    if bad is not None:
        raise damaged(path, ValueError(f"non-finite numbers in {bad}"))
    if same_shapes and named:
        first, shapes = next((k, [np.shape(a) for a in v]) for k, v in named.items())
        for name, arrays in named.items():
            found = [np.shape(a) for a in arrays]
            if found != shapes:
                i = next((j for j, (f, s) in enumerate(zip(found, shapes)) if f != s), None)
                problem = (
                    f"{name!r} has {len(found)} arrays, {first!r} {len(shapes)}"
                    if i is None
                    else f"{name!r} array {i} has shape {found[i]}, {first!r} {shapes[i]}"
                )
                raise damaged(path, ValueError(f"{problem}: not one model"))
    if masks:
        for name, arrays in named.items():
            for i, array in enumerate(arrays):
                outside = np.asarray(array)[(array != 0) & (array != 1)]
                if outside.size:
                    problem = (
                        f"{name!r} array {i} holds {outside.flat[0]!r}, not a mask value 0 or 1"
                    )
                    raise damaged(path, ValueError(problem))


def _checked_groups(
    path: Path, groups: dict[int, Weights], what: str, masks: bool = False
) -> dict[int, Weights]:
    """``groups`` (``{client or cluster: arrays}``) after :func:`check_arrays`."""
    named = {f"{what} {g}": arrays for g, arrays in groups.items()}
    check_arrays(path, named, same_shapes=True, masks=masks)
    return groups


# --- clusters.json: client id -> cluster ----------------------------------------------------
def write_clusters(run: Path, cluster_of: Mapping[int, int]) -> None:
    write_json(run / names.CLUSTERS, {str(i): int(c) for i, c in cluster_of.items()})


def read_clusters(run: Path) -> dict[int, int]:
    raw = read_json(run / names.CLUSTERS)
    try:
        return {int(k): int(v) for k, v in raw.items()}
    except (AttributeError, TypeError, ValueError):
        raise damaged(run / names.CLUSTERS, ValueError("not a client -> cluster map")) from None


# --- cluster_choice.json: how --clusters auto chose K (pipeline) ----------------------------
def write_cluster_choice(run: Path, record: Mapping) -> None:
    """``record``: the signal, distance, linkage, ``max_clusters``, ``min_silhouette``, the
    mean ``silhouette`` of every K tried (string keys) and the K ``chosen``."""
    write_json(run / names.CLUSTER_CHOICE, dict(record))


def read_cluster_choice(run: Path) -> dict:
    """What :func:`write_cluster_choice` wrote; K as integers in ``silhouette``."""
    path = run / names.CLUSTER_CHOICE
    raw = read_json(path)
    try:
        silhouette = {int(k): float(v) for k, v in raw["silhouette"].items()}
        return {**raw, "silhouette": silhouette, "chosen": int(raw["chosen"])}
    except (AttributeError, KeyError, TypeError, ValueError):
        raise damaged(path, ValueError("not a record of how K was chosen")) from None


# --- reclusters.json: the split/merge passes of --recluster split-merge (pipeline) ---------
def write_reclusters(run: Path, records: Sequence[Mapping]) -> None:
    """``records``: one per pass, in order (``round``, ``clusters_before``,
    ``clusters_after``, ``G`` per cluster, ``splits``, ``merges``,
    ``splits_undone_for_max_clusters``; written by
    :mod:`fedprune.algorithms.pipeline.recluster`)."""
    write_json(run / names.RECLUSTERS, [dict(r) for r in records])


def read_reclusters(run: Path) -> list[dict]:
    """What :func:`write_reclusters` wrote."""
    path = run / names.RECLUSTERS
    raw = read_json(path)
    if not isinstance(raw, list) or not all(
        isinstance(r, dict) and {"round", "clusters_before", "clusters_after"} <= set(r)
        for r in raw
    ):
        raise damaged(path, ValueError("not a list of split/merge passes"))
    return raw


# --- masks.npz: each cluster's kernel masks (uint8, prunable kernels only) -------------------
def write_masks(run: Path, kernel_masks: Mapping[int, Sequence[np.ndarray]]) -> None:
    write_npz(
        run / names.MASKS,
        numbered_arrays(
            {c: [m.astype(np.uint8) for m in ms] for c, ms in kernel_masks.items()}, "cluster"
        ),
    )


def read_masks(run: Path) -> dict[int, Weights]:
    path = run / names.MASKS
    groups = numbered_groups(path, read_npz(path), r"cluster(\d+)_(\d+)")
    return _checked_groups(path, groups, "cluster", masks=True)


# --- cluster_models.npz: each cluster's model (pipeline: before fine-tuning; AS-CFL: final) --
def write_cluster_models(run: Path, weights: Mapping[int, Sequence[np.ndarray]]) -> None:
    write_npz(run / names.CLUSTER_MODELS, numbered_arrays(weights, "cluster"))


def read_cluster_models(run: Path, file: str = names.CLUSTER_MODELS) -> dict[int, Weights]:
    """``{cluster: trainable weights}`` of ``run/file`` (a deploy manifest may name it)."""
    path = run / file
    groups = numbered_groups(path, read_npz(path), r"cluster(\d+)_(\d+)")
    return _checked_groups(path, groups, "cluster")


# --- personal_ft<E>.npz: each client's model after E epochs of fine-tuning ------------------
def write_personal_models(
    run: Path, epochs: int, weights: Mapping[int, Sequence[np.ndarray]]
) -> None:
    write_npz(run / names.personal_file(epochs), numbered_arrays(weights, "client"))


def read_personal_models(run: Path, epochs: int) -> dict[int, Weights]:
    path = run / names.personal_file(epochs)
    models = numbered_groups(path, read_npz(path), r"client(\d+)_(\d+)")
    if not models:
        raise damaged(path, ValueError("no client models"))
    return _checked_groups(path, models, "client")


def personal_epochs(run: Path) -> list[int]:
    """The fine-tuning lengths whose personal models are in ``run``."""
    import re

    return sorted(
        int(m[1]) for p in run.iterdir() if (m := re.fullmatch(names.PERSONAL_PATTERN, p.name))
    )


# --- community_models.npz: FedCRef's community autoencoders ---------------------------------
def write_community_models(run: Path, models: Sequence[Sequence[np.ndarray]]) -> None:
    write_npz(run / names.COMMUNITY_MODELS, numbered_arrays(dict(enumerate(models)), "c"))


def read_community_models(run: Path) -> list[Weights]:
    path = run / names.COMMUNITY_MODELS
    groups = _checked_groups(
        path, numbered_groups(path, read_npz(path), r"c(\d+)_(\d+)"), "community"
    )
    return [groups[g] for g in sorted(groups)]


# --- assignments.npz: FedCRef's final local cluster of every sample, per client -------------
def write_assignments(run: Path, assignments: Sequence[np.ndarray]) -> None:
    write_npz(run / names.ASSIGNMENTS, {f"client{i}": a for i, a in enumerate(assignments)})


def read_assignments(run: Path) -> list[np.ndarray]:
    path = run / names.ASSIGNMENTS
    arrays = read_npz(path)
    try:
        return [arrays[f"client{i}"] for i in range(len(arrays))]
    except KeyError as err:
        raise damaged(path, KeyError(f"no array {err.args[0]!r}")) from None


# --- checkpoint.npz, read-only (the writer is RunDir.save_checkpoint) ------------------------
def read_checkpoint_arrays(run: Path) -> dict[str, Weights]:
    """The named array lists of a finished run's ``checkpoint.npz``."""
    path = run / names.CHECKPOINT
    flat = read_npz(path)
    arrays = {}
    try:
        for key in flat:
            if key.endswith("__n"):
                name = key[:-3]
                arrays[name] = [flat[f"{name}__{i}"] for i in range(int(flat[key]))]
        int(flat["round"])
    except KeyError as err:
        raise damaged(path, KeyError(f"no array {err.args[0]!r}")) from None
    except (TypeError, ValueError) as err:
        raise damaged(path, err) from None
    check_arrays(path, arrays)
    return arrays
