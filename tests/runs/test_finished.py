"""fedprune.runs.finished: the reader's view of a finished run directory.

The old-layout directories are written by hand, as fedprune wrote them before issue 15
(``np.savez`` / ``json.dumps`` with the same keys, a ``summary.json`` without ``deploy``);
the manifest directories carry a ``deploy`` manifest that wins over the method's layout.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fedprune.data import uci_har
from fedprune.errors import DataError
from fedprune.runs import names
from fedprune.runs.deploy import har_manifest
from fedprune.runs.finished import finished_summary, is_finished, open_finished

RNG = np.random.default_rng(1)
SHAPES = [(3, 9, 4), (4,), (36, 6), (6,)]  # two kernels, two biases
CAAFP = {"method": "caafp", "dataset": "uci_har", "seed": 0, "ft_epochs": [1, 3]}


def _weights() -> list[np.ndarray]:
    return [RNG.normal(size=s).astype(np.float32) for s in SHAPES]


def _old_checkpoint(run: Path, trainable: list[np.ndarray]) -> None:
    flat = {"round": np.array(4), "trainable__n": np.array(len(trainable))}
    flat.update({f"trainable__{i}": w for i, w in enumerate(trainable)})
    np.savez(run / names.CHECKPOINT, **flat)


def _old_caafp(run: Path) -> dict:
    """A CA-AFP run of the old layout: personal models after 1 and 3 epochs, masks per
    cluster, each client's cluster; returns what was written."""
    run.mkdir()
    (run / names.CONFIG).write_text(json.dumps(CAAFP, indent=2))
    (run / names.SUMMARY).write_text(json.dumps({"method": "caafp", "finetune": {}}))
    (run / names.METRICS).write_text("round,phase,cluster\n1,fedavg,-1\n2,prune,0\n")
    trainable = _weights()
    _old_checkpoint(run, trainable)
    personal = {e: {c: _weights() for c in (1, 2, 5)} for e in (1, 3)}
    for e, models in personal.items():
        np.savez(
            run / f"personal_ft{e}.npz",
            **{f"client{c}_{i}": w for c, ws in models.items() for i, w in enumerate(ws)},
        )
    masks = {c: [(RNG.random(s) > 0.5).astype(np.uint8) for s in SHAPES[::2]] for c in (0, 1)}
    np.savez(
        run / names.MASKS,
        **{f"cluster{c}_{i}": m for c, ms in masks.items() for i, m in enumerate(ms)},
    )
    clusters = {1: 0, 2: 1, 5: 0}
    (run / names.CLUSTERS).write_text(json.dumps({str(k): v for k, v in clusters.items()}))
    return {"trainable": trainable, "personal": personal, "masks": masks, "clusters": clusters}


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def test_old_caafp_run_gets_a_derived_manifest_and_its_files_read(tmp_path):
    written = _old_caafp(tmp_path / "run")
    run = open_finished(tmp_path / "run")
    deploy = run.deploy
    assert deploy.kind == "personal" and deploy.model == "har_cnn"
    assert deploy.models == {"1": "personal_ft1.npz", "3": "personal_ft3.npz"}
    assert deploy.labels == uci_har.CLASS_NAMES and deploy.input_shape == (128, 9)
    assert deploy.data == {
        "loader": "har",
        "dataset": "uci_har",
        "seed": 0,
        "standardize": False,
        "split": "random",  # runs before --split used the random split
    }

    file, models = run.personal_models()  # the longest fine-tuning
    assert file == "personal_ft3.npz" and sorted(models) == [1, 2, 5]
    assert all(_same(models[c], written["personal"][3][c]) for c in models)
    file, models = run.personal_models(1)
    assert file == "personal_ft1.npz" and _same(models[2], written["personal"][1][2])

    masks, clusters = run.kernel_masks()
    assert clusters == written["clusters"]
    assert all(_same(masks[c], written["masks"][c]) for c in (0, 1))
    assert _same(run.global_model(), written["trainable"])
    assert [row["phase"] for row in run.metrics()] == ["fedavg", "prune"]


def test_old_dense_personal_run_has_no_masks(tmp_path):
    _old_caafp(tmp_path / "run")
    (tmp_path / "run" / names.MASKS).unlink()  # ClusterFL / FedCHAR: no masks.npz
    assert open_finished(tmp_path / "run").kernel_masks() is None


def test_a_missing_fine_tuning_length_names_the_present_ones(tmp_path):
    _old_caafp(tmp_path / "run")
    run = open_finished(tmp_path / "run")
    with pytest.raises(DataError) as err:
        run.personal_models(7)
    assert str(err.value) == (
        f"{tmp_path / 'run' / 'personal_ft7.npz'} is missing (--ft-epochs 7); the run has "
        "personal models after 1, 3 epochs: pass one of those with --ft-epochs"
    )


def test_old_fedavg_and_fedcref_runs(tmp_path):
    fedavg = tmp_path / "fedavg"
    fedavg.mkdir()
    config = {"method": "fedavg", "dataset": "wisdm", "seed": 4}
    (fedavg / names.CONFIG).write_text(json.dumps(config))
    (fedavg / names.SUMMARY).write_text("{}")
    trainable = _weights()
    _old_checkpoint(fedavg, trainable)
    run = open_finished(fedavg)
    assert run.deploy.kind == "global" and run.kernel_masks() is None
    assert _same(run.global_model(), trainable)

    fedcref = tmp_path / "fedcref"
    fedcref.mkdir()
    config = {"method": "fedcref", "dataset": "mnist", "num_clients": 4, "seed": 0}
    (fedcref / names.CONFIG).write_text(json.dumps(config))
    (fedcref / names.SUMMARY).write_text("{}")
    models = [_weights() for _ in range(2)]
    np.savez(
        fedcref / names.COMMUNITY_MODELS,
        **{f"c{g}_{k}": w for g, m in enumerate(models) for k, w in enumerate(m)},
    )
    run = open_finished(fedcref)
    assert run.deploy.kind == "community" and run.deploy.data["num_clients"] == 4
    assert all(_same(a, b) for a, b in zip(run.community_models(), models))
    np.savez(fedcref / names.COMMUNITY_MODELS)  # a run that found no community
    with pytest.raises(DataError, match="found no community, nothing to export"):
        run.community_models()


def test_a_recorded_manifest_wins_over_the_method(tmp_path):
    """A run of a method the legacy derivation does not know, with a manifest: read as its
    manifest says (the personal models of 2 epochs, no masks though masks.npz exists)."""
    written = _old_caafp(tmp_path / "run")
    data = {"loader": "har", "dataset": "uci_har", "seed": 0, "standardize": True}
    manifest = har_manifest("personal", data, (128, 9), uci_har.CLASS_NAMES, (1,))
    (tmp_path / "run" / names.CONFIG).write_text(json.dumps({"method": "newfl", "seed": 0}))
    summary = {"avg_acc": 0.9, "deploy": manifest.to_json()}
    (tmp_path / "run" / names.SUMMARY).write_text(json.dumps(summary))

    run = open_finished(tmp_path / "run")
    assert run.deploy == manifest and run.deploy.data["standardize"] is True
    file, models = run.personal_models()  # the manifest lists 1 epoch only
    assert file == "personal_ft1.npz" and _same(models[5], written["personal"][1][5])
    assert run.kernel_masks() is None


def test_unknown_method_without_manifest_is_refused_in_one_line(tmp_path):
    _old_caafp(tmp_path / "run")
    config = {"method": "newfl", "dataset": "uci_har", "seed": 0}
    (tmp_path / "run" / names.CONFIG).write_text(json.dumps(config))
    run = open_finished(tmp_path / "run")
    with pytest.raises(DataError) as err:
        _ = run.deploy
    assert str(err.value) == (
        f"{tmp_path / 'run'}: runs of method 'newfl' cannot be exported; re-run training with "
        f"this version to export {tmp_path / 'run'}"
    )


# --- damaged or unfinished directories: one error naming the file --------------------------------


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize(
    ("file", "read"),
    [
        (names.CONFIG, lambda path: open_finished(path)),
        (names.SUMMARY, lambda path: open_finished(path)),
        ("personal_ft3.npz", lambda path: open_finished(path).personal_models()),
        ("personal_ft1.npz", lambda path: open_finished(path).personal_models(1)),
        (names.MASKS, lambda path: open_finished(path).kernel_masks()),
        (names.CLUSTERS, lambda path: open_finished(path).kernel_masks()),
        (names.CHECKPOINT, lambda path: open_finished(path).global_model()),
    ],
)
def test_a_damaged_file_is_named(tmp_path, file, read):
    _old_caafp(tmp_path / "run")
    _truncate(tmp_path / "run" / file)
    with pytest.raises(DataError) as err:
        read(tmp_path / "run")
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'run' / file} is damaged") and "\n" not in message


def test_damaged_metrics_and_manifest_are_named(tmp_path):
    _old_caafp(tmp_path / "run")
    with open(tmp_path / "run" / names.METRICS, "a") as f:
        f.write("3,prune\n")  # a row cut short
    run = open_finished(tmp_path / "run")
    with pytest.raises(DataError, match=f"{names.METRICS}, line 4: wrong number of fields"):
        run.metrics()
    (tmp_path / "run" / names.SUMMARY).write_text(json.dumps({"deploy": {"kind": "global"}}))
    with pytest.raises(DataError, match=f"{names.SUMMARY}: the deploy manifest is incomplete"):
        _ = open_finished(tmp_path / "run").deploy


def test_masks_of_an_unknown_cluster_are_damaged(tmp_path):
    _old_caafp(tmp_path / "run")
    (tmp_path / "run" / names.CLUSTERS).write_text(json.dumps({"1": 0, "2": 7}))
    with pytest.raises(DataError, match=r"masks.npz is damaged \(no masks of cluster\(s\) \[7\]\)"):
        open_finished(tmp_path / "run").kernel_masks()


@pytest.mark.parametrize(
    ("prepare", "words"),
    [
        (lambda run: None, "is not a fedprune run directory (it does not exist)"),
        (lambda run: run.write_text("x"), "is not a fedprune run directory (it is a file)"),
        (lambda run: run.mkdir(), f"is not a fedprune run directory (no {names.CONFIG})"),
        (
            lambda run: (run.mkdir(), (run / names.CONFIG).write_text('{"seed": 0}')),
            f"the run has not finished (no {names.SUMMARY})",
        ),
        (
            lambda run: (
                run.mkdir(),
                (run / names.CONFIG).write_text("{}"),
                (run / names.SUMMARY).write_text("{}"),
            ),
            "config.json is damaged (no seed)",
        ),
    ],
)
def test_not_a_finished_run(tmp_path, prepare, words):
    prepare(tmp_path / "run")
    with pytest.raises(DataError) as err:
        open_finished(tmp_path / "run")
    assert words in str(err.value) and str(tmp_path / "run") in str(err.value)


def test_finished_summary_needs_no_config(tmp_path):
    run = tmp_path / "run"
    assert not is_finished(run) and finished_summary(run) is None
    run.mkdir()
    (run / names.SUMMARY).write_text('{"wall_s": 3.5}')
    assert is_finished(run) and finished_summary(run) == {"wall_s": 3.5}
    (run / names.SUMMARY).write_text("[1]")
    with pytest.raises(DataError, match="summary.json is damaged \\(not a JSON object\\)"):
        finished_summary(run)


def test_a_run_without_fine_tuning_lengths_says_so(tmp_path):
    _old_caafp(tmp_path / "run")
    (tmp_path / "run" / names.CONFIG).write_text(json.dumps({**CAAFP, "ft_epochs": []}))
    with pytest.raises(DataError) as err:
        open_finished(tmp_path / "run").personal_models()
    assert str(err.value).startswith(
        f"{tmp_path / 'run' / 'personal_ft<E>.npz'} is missing (the longest fine-tuning); "
        "the run has personal models after 1, 3 epochs"
    )
