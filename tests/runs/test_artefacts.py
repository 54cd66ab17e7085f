"""fedprune.runs.artefacts: every writer/reader pair round-trips, and a missing or damaged file
is one DataError line naming the file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from fedprune.errors import DataError
from fedprune.runs import RunDir, artefacts, names
from tests.conftest import damage_zip_member

RNG = np.random.default_rng(0)


def _weights(*shapes: tuple[int, ...]) -> list[np.ndarray]:
    return [RNG.normal(size=s).astype(np.float32) for s in shapes]


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(
        x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a, b)
    )


# --- round trips ------------------------------------------------------------------------------


def test_clusters_round_trip(tmp_path):
    artefacts.write_clusters(tmp_path, {3: 1, 1: 0, 12: np.int64(2)})
    assert artefacts.read_clusters(tmp_path) == {1: 0, 3: 1, 12: 2}
    assert json.loads((tmp_path / names.CLUSTERS).read_text()) == {"1": 0, "3": 1, "12": 2}


def test_cluster_choice_round_trip(tmp_path):
    record = {"signal": "update", "chosen": 3, "min_silhouette": 0.2}
    artefacts.write_cluster_choice(tmp_path, {**record, "silhouette": {"2": 0.25, "3": 0.5}})
    read = artefacts.read_cluster_choice(tmp_path)
    assert read == {**record, "silhouette": {2: 0.25, 3: 0.5}}
    (tmp_path / names.CLUSTER_CHOICE).write_text('{"chosen": 3}')
    with pytest.raises(DataError, match="not a record of how K was chosen"):
        artefacts.read_cluster_choice(tmp_path)


def test_masks_round_trip_as_uint8(tmp_path):
    masks = {
        0: [RNG.random((3, 4)) > 0.5, RNG.random((4,)) > 0.5],
        2: [np.ones((3, 4)), np.zeros(4)],
    }
    artefacts.write_masks(tmp_path, masks)
    read = artefacts.read_masks(tmp_path)
    assert sorted(read) == [0, 2]
    for c, ms in masks.items():
        assert all(r.dtype == np.uint8 for r in read[c])
        assert _same(read[c], [m.astype(np.uint8) for m in ms])


def test_cluster_and_personal_models_round_trip(tmp_path):
    # 12 arrays per group: index 10 and 11 must not sort before 2 (string order would)
    shapes = [(2, 2)] * 12
    clusters = {0: _weights(*shapes), 1: _weights(*shapes)}
    artefacts.write_cluster_models(tmp_path, clusters)
    read = artefacts.read_cluster_models(tmp_path)
    assert all(_same(read[c], clusters[c]) for c in clusters)

    personal = {5: _weights((3,), (2, 3)), 11: _weights((3,), (2, 3))}
    artefacts.write_personal_models(tmp_path, 25, personal)
    artefacts.write_personal_models(tmp_path, 3, personal)
    assert (tmp_path / "personal_ft25.npz").exists()
    read = artefacts.read_personal_models(tmp_path, 25)
    assert sorted(read) == [5, 11] and all(_same(read[c], personal[c]) for c in personal)
    assert artefacts.personal_epochs(tmp_path) == [3, 25]


def test_community_models_keep_their_order(tmp_path):
    models = [_weights((4, 2), (2,)) for _ in range(12)]
    artefacts.write_community_models(tmp_path, models)
    read = artefacts.read_community_models(tmp_path)
    assert len(read) == 12 and all(_same(r, m) for r, m in zip(read, models))
    artefacts.write_community_models(tmp_path, [])
    assert artefacts.read_community_models(tmp_path) == []


def test_assignments_round_trip(tmp_path):
    assignments = [np.array([0, 1, 1]), np.array([2]), np.array([], dtype=np.int64)]
    artefacts.write_assignments(tmp_path, assignments)
    read = artefacts.read_assignments(tmp_path)
    assert len(read) == 3 and all(np.array_equal(r, a) for r, a in zip(read, assignments))


def test_checkpoint_arrays_read_what_rundir_wrote(tmp_path):
    trainable = _weights((3, 2), (2,))
    RunDir(tmp_path, {"seed": 0}).save_checkpoint(
        4, {"trainable": trainable, "empty": []}, {"wall_s": 2.0}
    )
    arrays = artefacts.read_checkpoint_arrays(tmp_path)
    assert set(arrays) == {"trainable", "empty"}
    assert _same(arrays["trainable"], trainable) and arrays["empty"] == []


# --- damaged files ------------------------------------------------------------------------------


def _write_all(run: Path) -> None:
    artefacts.write_clusters(run, {1: 0})
    artefacts.write_masks(run, {0: [np.ones((2, 2))]})
    artefacts.write_cluster_models(run, {0: _weights((2, 2))})
    artefacts.write_personal_models(run, 3, {1: _weights((2, 2), (2,))})
    artefacts.write_community_models(run, [_weights((2, 2))])
    artefacts.write_assignments(run, [np.array([0, 1])])
    RunDir(run, {"seed": 0}).save_checkpoint(1, {"trainable": _weights((2, 2))})


READERS: dict[str, Callable[[Path], object]] = {
    names.CLUSTERS: artefacts.read_clusters,
    names.MASKS: artefacts.read_masks,
    names.CLUSTER_MODELS: artefacts.read_cluster_models,
    names.personal_file(3): lambda run: artefacts.read_personal_models(run, 3),
    names.COMMUNITY_MODELS: artefacts.read_community_models,
    names.ASSIGNMENTS: artefacts.read_assignments,
    names.CHECKPOINT: artefacts.read_checkpoint_arrays,
}


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garbage(path: Path) -> None:
    path.write_bytes(b"not what fedprune wrote\n" * 5)


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _remove(path: Path) -> None:
    path.unlink()


def _one_line(err: pytest.ExceptionInfo, path: Path, words: str) -> None:
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(str(path)) and words in message


@pytest.mark.parametrize("file", list(READERS))
@pytest.mark.parametrize("damage", [_truncate, _garbage, _empty, _remove])
def test_a_damaged_file_is_one_error_naming_it(tmp_path, file, damage):
    _write_all(tmp_path)
    READERS[file](tmp_path)  # intact: reads
    damage(tmp_path / file)
    with pytest.raises(DataError) as err:
        READERS[file](tmp_path)
    _one_line(err, tmp_path / file, "is missing" if damage is _remove else "is damaged")


def test_a_flipped_byte_in_an_archive_member_is_found_when_read(tmp_path):
    _write_all(tmp_path)
    damage_zip_member(tmp_path / names.MASKS, "cluster0_0.npy")
    with pytest.raises(DataError) as err:
        artefacts.read_masks(tmp_path)
    _one_line(err, tmp_path / names.MASKS, "is damaged")


@pytest.mark.parametrize(
    ("file", "arrays", "words"),
    [
        (names.MASKS, {"cluster0_0": np.ones(2), "stray": np.ones(2)}, "unexpected array 'stray'"),
        (names.MASKS, {"cluster0_0": np.ones(2), "cluster0_2": np.ones(2)}, "not numbered 0..n-1"),
        (names.COMMUNITY_MODELS, {"c0_1": np.ones(2)}, "not numbered 0..n-1"),
        (names.personal_file(3), {}, "no client models"),
        (names.ASSIGNMENTS, {"client0": np.ones(2), "client2": np.ones(2)}, "no array 'client1'"),
        (names.CHECKPOINT, {"trainable__n": np.array(2), "trainable__0": np.ones(2)}, "no array"),
        (names.CHECKPOINT, {"trainable__n": np.array(0)}, "no array 'round'"),
    ],
)
def test_archives_of_another_layout_are_damaged(tmp_path, file, arrays, words):
    np.savez(tmp_path / file, **arrays)
    with pytest.raises(DataError) as err:
        READERS[file](tmp_path)
    _one_line(err, tmp_path / file, words)


@pytest.mark.parametrize("content", ['["a list"]', '{"1": "zero"}', '{"one": 0}', "3"])
def test_clusters_that_are_not_a_client_map_are_damaged(tmp_path, content):
    (tmp_path / names.CLUSTERS).write_text(content)
    with pytest.raises(DataError) as err:
        artefacts.read_clusters(tmp_path)
    _one_line(err, tmp_path / names.CLUSTERS, "not a client -> cluster map")
