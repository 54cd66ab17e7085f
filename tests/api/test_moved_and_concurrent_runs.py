"""A run folder of the Python API moved elsewhere still reopens, fine-tunes and exports (it
records its own ``dataset.npz`` by its name in the folder); a second ``Trainer.run`` in
another thread of the process is one clear error naming the first, and leaves nothing."""

from __future__ import annotations

import json
import shutil
import threading
import time

import pytest

import fedprune as fp
from fedprune.workers import execution
from tests.api.test_builders import windows

pytestmark = pytest.mark.slow

OPTIONS = dict(phases=(0, 1, 0), clusters=2, clients_per_round=3, ft_epochs=(1,), local_epochs=1)


def test_a_moved_run_reopens_fine_tunes_and_exports(tmp_path, capsys):
    from edge_export.cli import main as edge_export
    from fedprune.cli import main

    data = windows()
    first = fp.caafp(data, **OPTIONS).run(tmp_path / "run", progress=False)
    assert json.loads((tmp_path / "run" / "config.json").read_text())["dataset"] == "dataset.npz"
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["deploy"]["data"]["dataset"] == "dataset.npz"  # as the files record it
    finetuned = first.summary["finetune"]
    shutil.move(tmp_path / "run", tmp_path / "moved")
    assert not (tmp_path / "run").exists()
    moved = tmp_path / "moved"
    again = fp.caafp(data, **OPTIONS).run(moved, progress=False)  # finished: returned as is
    assert again.summary["finetune"] == finetuned
    assert sorted(fp.open_result(moved).models()) == [0, 1, 2]
    assert main(["finetune", str(moved), "--ft-epochs", "2", "--out", str(tmp_path / "ft")]) == 0
    out = tmp_path / "export"
    assert edge_export([str(moved), "--out", str(out), "--formats", "float32"]) == 0
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["client0", "client1", "client2"]
    # its copy of the data gone: one line naming that file, not a --dataset option
    (moved / "dataset.npz").unlink()
    capsys.readouterr()
    assert edge_export([str(moved), "--out", str(tmp_path / "e2"), "--formats", "float32"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "dataset.npz, is missing" in errors[0], errors
    assert "--dataset" not in errors[0] and "move or copy the folder whole" in errors[0]
    assert not (tmp_path / "e2").exists()


def test_a_run_recorded_by_absolute_path_and_moved_still_reads(tmp_path):
    from fedprune.runs.finished import open_finished

    fp.caafp(windows(), **OPTIONS).run(tmp_path / "run", progress=False)
    for name in ("config.json", "summary.json"):  # as runs before relative records wrote them
        record = json.loads((tmp_path / "run" / name).read_text())
        old = str((tmp_path / "run" / "dataset.npz").resolve())
        record["dataset"] = old
        if "deploy" in record:
            record["deploy"]["data"]["dataset"] = old
        (tmp_path / "run" / name).write_text(json.dumps(record))
    shutil.move(tmp_path / "run", tmp_path / "moved")
    run = open_finished(tmp_path / "moved")
    here = str((tmp_path / "moved" / "dataset.npz").absolute())
    assert run.config["dataset"] == here and run.deploy.data["dataset"] == here
    assert sorted(fp.open_result(tmp_path / "moved").models()) == [0, 1, 2]


def test_a_second_run_in_another_thread_is_refused_naming_the_first(tmp_path):
    first = fp.fedavg(windows(), rounds=3, clients_per_round=3, local_epochs=1)
    results: dict = {}

    def train() -> None:
        try:
            results["first"] = first.run(tmp_path / "first", progress=False)
        except BaseException as err:  # reported by the assertion below
            results["first"] = err

    thread = threading.Thread(target=train, name="first-run")
    thread.start()
    deadline = time.monotonic() + 600
    while not execution._running and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert execution._running, results  # the first run holds the process's TFF execution
    second = fp.kfed(fp.from_table([[0.0], [1.0], [5.0], [6.0]], [1, 1, 2, 2]), k_star=2)
    with pytest.raises(execution.RunInProgress) as caught:
        second.run(tmp_path / "second", progress=False)
    message = str(caught.value)
    assert f"this process is already training {tmp_path / 'first'}" in message, message
    assert "thread 'first-run'" in message and "\n" not in message
    assert not (tmp_path / "second").exists()  # nothing of the refused run was made
    thread.join(900)
    assert isinstance(results["first"], fp.Result), results
    assert results["first"].summary["rounds"] == 3
    after = second.run(tmp_path / "second", progress=False)  # once the first has ended
    assert sorted(after.assignments()) == [1, 2]


def test_images_with_integer_class_names_reopen_with_the_same_data(tmp_path):
    """Class names given as numbers are names ("0", "1"): the finished run is returned for
    the same data object, not refused as trained on other data."""
    import numpy as np

    rng = np.random.default_rng(0)
    proxy = (rng.random((4, 8, 8, 1)).astype(np.float32), np.array([0, 1, 0, 1]))
    images = fp.from_images(
        rng.random((24, 8, 8, 1)).astype(np.float32), np.tile([0, 1], 12),
        np.repeat([3, 7], 12), proxy=proxy, class_names=[0, 1],
    )  # fmt: skip
    assert images.class_names == ("0", "1")
    trainer = fp.ifca(images, rounds=1, clusters=2, batch_size=8)
    first = trainer.run(tmp_path / "run", progress=False).summary
    assert trainer.run(tmp_path / "run", progress=False).summary == first
