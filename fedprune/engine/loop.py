"""The one resumable round loop every algorithm runs its rounds (or iterations) in.

An algorithm supplies a state, a way to rebuild it from a checkpoint, and a step function
``step(t, state) -> Step`` for round ``t`` (1-based). :func:`run_rounds` owns everything around
the steps:

* **restore**: the last ``checkpoint.npz`` of the run directory, if any, through the
  algorithm's ``restore(rounds_done, arrays, scalars)``, once it is checked: finite, its round
  within ``total`` (:meth:`~fedprune.runs.RunDir.load_checkpoint`) and its arrays of the shapes
  the algorithm gives (``shapes``); a checkpoint that fails, or lacks an array ``restore``
  needs, is one error line naming it. The metrics rows of rounds the checkpoint does not cover
  (an interrupted round) are dropped;
* **after every step**: its metrics rows are appended to ``metrics.csv`` (and written to the
  run's TensorBoard event files, :mod:`fedprune.runs.events`), then the state's
  ``to_checkpoint()`` is saved atomically with the wall time so far (scalar ``wall_s``), so
  Ctrl-C or a crash loses at most the round in progress;
* **progress**: one tqdm bar over all rounds (the description may change per round, e.g. per
  phase), hidden with ``progress=False``;
* **wall time**: :attr:`RoundsResult.clock` keeps counting (across resumes) until the summary.

A step may end the run early (``Step.stop``; FedCRef's stopping rule); the state then records
that it is done, so that a resumed run does not step again.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Generic, Protocol, TypeVar

import numpy as np
from tqdm import tqdm

from fedprune.runs import RunDir

Arrays = dict[str, list[np.ndarray]]
Scalars = dict[str, float]


class Checkpointable(Protocol):
    def to_checkpoint(self) -> tuple[Mapping[str, Sequence[np.ndarray]], Mapping[str, float]]:
        """(named array lists, named scalars) that ``restore`` turns back into the state."""


S = TypeVar("S", bound=Checkpointable)


@dataclasses.dataclass
class Step(Generic[S]):
    """What one round produced: the new state, its ``metrics.csv`` rows (one per cluster, or
    one), numbers for the progress bar, and whether the algorithm is done early."""

    state: S
    rows: list[dict] = dataclasses.field(default_factory=list)
    postfix: dict[str, str] = dataclasses.field(default_factory=dict)
    stop: bool = False


class WallClock:
    """Seconds of work on a run: those before a resume plus those since."""

    def __init__(self, before: float = 0.0):
        self.before = before
        self.start = time.perf_counter()

    def seconds(self) -> float:
        return self.before + time.perf_counter() - self.start


@dataclasses.dataclass
class RoundsResult(Generic[S]):
    state: S
    rounds: int  # rounds (or iterations) done in total
    clock: WallClock


def run_rounds(
    run: RunDir,
    initial: Callable[[], S],
    restore: Callable[[int, Arrays, Scalars], S],
    step: Callable[[int, S], Step[S]],
    total: int,
    *,
    desc: str | Callable[[int], str],
    progress: bool = True,
    unit: str = "round",
    round_key: str = "round",
    finished: Callable[[S], bool] = lambda _state: False,
    wall_column: str | None = None,
    shapes: Callable[[Arrays], Mapping[str, Sequence[tuple[int, ...]]]] | None = None,
    total_option: str | None = None,
) -> RoundsResult[S]:
    """Run (or resume) rounds ``1..total`` of an algorithm in ``run``; see the module text.

    ``initial()`` builds the state of a fresh run (only called without a checkpoint);
    ``desc`` is the progress bar's description, or a function of the round; ``finished``
    tells whether a restored state has already stopped early (then no step runs);
    ``wall_column`` names a metrics column that receives the run's wall time so far (s);
    ``shapes(arrays)`` gives the shapes a checkpoint's arrays must have (name -> the shape of
    each array of that list; see :meth:`~fedprune.runs.RunDir.check_checkpoint_shapes`);
    ``total_option`` is the option that set ``total``, named when a checkpoint is beyond it
    (default: ``--rounds``, or ``--max-iterations`` where the loop counts iterations, ``unit``
    ``"it"``).
    """
    if total_option is None:
        total_option = "--rounds" if unit == "round" else "--max-iterations"
    checkpoint = run.load_checkpoint(total, total_option)
    if checkpoint is None:
        done, state, clock = 0, initial(), WallClock()
    else:
        done, arrays, scalars = checkpoint
        if shapes is not None:
            run.check_checkpoint_shapes(arrays, shapes(arrays))
        try:
            state = restore(done, arrays, scalars)
        except KeyError as err:
            missing = repr(err.args[0]) if err.args else "an array"
            raise run.unusable_checkpoint(f"is damaged (it lacks {missing})") from None
        except IndexError:
            raise run.unusable_checkpoint("is damaged (a list of arrays is cut short)") from None
        clock = WallClock(scalars.get("wall_s", 0.0))
    run.truncate_metrics(done, round_key=round_key)
    describe = desc if callable(desc) else (lambda _t: desc)
    bar = tqdm(total=total, initial=done, unit=unit, disable=not progress)
    try:
        t = done
        while t < total and not finished(state):
            t += 1
            bar.set_description(describe(t))
            result = step(t, state)
            state = result.state
            for row in result.rows:
                if wall_column is not None:
                    row = {**row, wall_column: round(clock.seconds(), 2)}
                run.append_metrics(row)
            run.events.end_step()
            arrays, scalars = state.to_checkpoint()
            run.save_checkpoint(t, arrays, {"wall_s": clock.seconds(), **scalars})
            bar.update(1)
            if result.postfix:
                bar.set_postfix(result.postfix)
            done = t
            if result.stop:
                break
    finally:
        bar.close()
    return RoundsResult(state, done, clock)
