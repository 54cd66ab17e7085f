"""TensorBoard event files written from metrics rows (:mod:`fedprune.runs.events`): tags and
steps as the rows give them, read back with TensorBoard's own loader; a rebuild (resume)
leaves each step once."""

from __future__ import annotations

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from fedprune.runs import RunDir
from fedprune.runs.events import EVENTS_DIR, EventLog, read_scalars, scalars_of


def test_a_row_becomes_scalars_under_its_columns_and_cluster():
    assert scalars_of({"round": 3, "phase": "prune", "cluster": 1, "train_loss": 0.5}) == (
        3,
        {"cluster_1/train_loss": 0.5},
    )
    # the all-clients row (-1), numbers written as text (a metrics.csv read back), empty cells
    assert scalars_of({"round": "4", "cluster": "-1", "acc": "0.25", "ari": ""}) == (
        4,
        {"acc": 0.25},
    )
    assert scalars_of({"iteration": 2, "communities": 3}) == (2, {"communities": 3.0})
    assert scalars_of({"acc": 0.5}) is None  # no step: nothing to place it at


def test_tensorboard_reads_the_scalars_the_cluster_count_and_a_histogram(tmp_path):
    log = EventLog(tmp_path)
    for t in (1, 2):
        log.add_row({"round": t, "cluster": -1, "train_accuracy": 0.5 + t / 10})
        log.end_step()
    for c in (0, 1, 2):
        log.add_row({"round": 3, "cluster": c, "train_accuracy": 0.7 + c / 100, "sparsity": 0.5})
    log.end_step()
    log.histogram("finetune/personal_accuracy", [0.8, 0.9, 0.95], step=3)

    tb = EventAccumulator(str(tmp_path / EVENTS_DIR))
    tb.Reload()
    tags = tb.Tags()
    assert {"train_accuracy", "cluster_2/sparsity", "clusters"} <= set(tags["tensors"])
    values = {e.step: float(e.tensor_proto.float_val[0]) for e in tb.Tensors("clusters")}
    assert values == {1: 1.0, 2: 1.0, 3: 3.0}  # all-clients rows: one model; then 3 clusters
    histogram = tb.Tensors("finetune/personal_accuracy")
    assert [e.step for e in histogram] == [3]


def test_rebuild_writes_each_step_once(tmp_path):
    run = RunDir(tmp_path / "run", {"seed": 0})
    for t in (1, 2, 3):
        run.append_metrics({"round": t, "acc": t / 10})
        run.events.end_step()
    run.truncate_metrics(2)  # resumed from the checkpoint of round 2: round 3 is redone
    run.append_metrics({"round": 3, "acc": 0.33})
    run.events.end_step()
    scalars = read_scalars(run.path)
    assert [step for step, _ in scalars["acc"]] == [1, 2, 3]
    assert [v for _, v in scalars["acc"]] == pytest.approx([0.1, 0.2, 0.33])  # float32
    assert len(list((run.path / EVENTS_DIR).iterdir())) == 1


def test_a_run_without_event_files_gets_them_from_its_metrics_on_resume(tmp_path):
    run = RunDir(tmp_path / "run", {"seed": 0})
    run.append_metrics({"round": 1, "acc": 0.5})
    for file in (run.path / EVENTS_DIR).iterdir():  # a run made before event files existed
        file.unlink()
    RunDir(run.path, {"seed": 0}).truncate_metrics(1)
    assert read_scalars(run.path) == {"acc": [(1, 0.5)]}  # 0.5: exact in float32
