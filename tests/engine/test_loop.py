"""The shared round loop (fedprune.engine.loop), with a toy state: restore, metrics
truncation, checkpoints, early stop and resume. Fast: no TensorFlow."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fedprune.engine.loop import Step, run_rounds
from fedprune.runs import RunDir


@dataclasses.dataclass
class Counter:
    """A toy algorithm state: a running sum and whether it has stopped."""

    total: np.ndarray
    stopped: bool = False

    def to_checkpoint(self):
        return {"total": [self.total]}, {"stopped": float(self.stopped)}

    @classmethod
    def restore(cls, rounds, arrays, scalars):
        return cls(arrays["total"][0], bool(scalars["stopped"]))


def _step(stop_at=None, fail_at=None):
    calls = []

    def step(t, state):
        calls.append(t)
        if t == fail_at:
            raise KeyboardInterrupt
        new = Counter(state.total + t, stopped=t == stop_at)
        return Step(new, [{"round": t, "total": float(new.total[0])}], stop=new.stopped)

    return step, calls


def _run(path, total, **kw):
    step, calls = _step(**{k: kw.pop(k) for k in ("stop_at", "fail_at") if k in kw})
    run = RunDir(path, {"method": "toy"})
    result = run_rounds(
        run,
        lambda: Counter(np.zeros(1)),
        Counter.restore,
        step,
        total,
        desc="toy",
        progress=False,
        finished=lambda s: s.stopped,
        **kw,
    )
    return run, result, calls


def test_all_rounds_run_and_every_round_is_a_metrics_row_and_a_checkpoint(tmp_path):
    run, result, calls = _run(tmp_path, 4)
    assert calls == [1, 2, 3, 4] and result.rounds == 4
    assert float(result.state.total[0]) == 1 + 2 + 3 + 4
    assert [r["total"] for r in run.metrics_rows()] == ["1.0", "3.0", "6.0", "10.0"]
    done, arrays, scalars = run.load_checkpoint()
    assert done == 4 and float(arrays["total"][0][0]) == 10 and scalars["wall_s"] >= 0


def test_an_interrupted_run_resumes_where_its_checkpoint_is_and_equals_an_uninterrupted_one(
    tmp_path,
):
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "a", 5, fail_at=3)
    run = RunDir(tmp_path / "a", {"method": "toy"})
    run.append_metrics({"round": 3, "total": 99.0})  # a row of the round that did not finish
    run, result, calls = _run(tmp_path / "a", 5)
    assert calls == [3, 4, 5]  # rounds 1-2 are not repeated
    full, _, _ = _run(tmp_path / "b", 5)
    assert run.metrics_rows() == full.metrics_rows()  # the stray row was dropped
    assert float(result.state.total[0]) == 15


def test_an_early_stop_is_final_also_on_resume(tmp_path):
    _, result, calls = _run(tmp_path, 10, stop_at=2)
    assert calls == [1, 2] and result.rounds == 2 and result.state.stopped
    _, again, calls = _run(tmp_path, 10)
    assert calls == [] and again.rounds == 2 and float(again.state.total[0]) == 3


def test_wall_time_is_carried_across_a_resume(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, 3, fail_at=2, wall_column="wall_s")
    run = RunDir(tmp_path, {"method": "toy"})
    done, arrays, scalars = run.load_checkpoint()
    run.save_checkpoint(done, arrays, {**scalars, "wall_s": 100.0})  # as if round 1 took 100 s
    run, result, _ = _run(tmp_path, 3, wall_column="wall_s")
    assert result.clock.seconds() >= 100.0
    assert [float(r["wall_s"]) >= 100.0 for r in run.metrics_rows()] == [False, True, True]
