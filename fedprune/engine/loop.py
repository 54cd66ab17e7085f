"""The one resumable round loop every algorithm runs its rounds (or iterations) in.

An algorithm (:class:`Algorithm`) supplies a fresh state, the schema its checkpoint must
meet, a way to rebuild the state from a checkpoint, and a step function ``step(t, state) ->
Step`` for round ``t`` (1-based). :func:`run_algorithm` owns everything around the steps:

* **restore**: the last ``checkpoint.npz`` of the run directory, if any, through the
  algorithm's ``restore(rounds_done, arrays, scalars)``, once it is checked: finite, its round
  within ``total`` (:meth:`~fedprune.runs.RunDir.load_checkpoint`), its arrays of the shapes
  the state's :class:`Schema` gives and its cluster numbers within the run's clusters; a
  checkpoint that fails, lacks an array ``restore`` needs, or that ``restore`` finds unfit
  (:class:`UnfitCheckpoint`) is one error line naming it. The metrics rows of rounds the
  checkpoint does not cover (an interrupted round) are dropped;
* **after every step**: its metrics rows are appended to ``metrics.csv`` (and written to the
  run's TensorBoard event files, :mod:`fedprune.runs.events`), then the state's
  ``to_checkpoint()`` is saved atomically with the wall time so far (scalar ``wall_s``), so
  Ctrl-C or a crash loses at most the round in progress;
* **progress**: one tqdm bar over all rounds (the description may change per round, e.g. per
  phase), hidden with ``progress=False``;
* **wall time**: :attr:`RoundsResult.clock` keeps counting (across resumes) until the summary.

A step may end the run early (``Step.stop``; FedCRef's stopping rule); the state then records
that it is done (:meth:`Algorithm.finished`), so that a resumed run does not step again.

:func:`run_rounds` is the same loop for an algorithm given as functions (``initial``,
``restore``, ``step`` and options).
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


@dataclasses.dataclass(frozen=True)
class Schema:
    """What a checkpoint's arrays must be to be restored into this run, checked before
    ``restore`` sees them: ``shapes`` maps a name to the shape of each array of that list
    (:meth:`~fedprune.runs.RunDir.check_checkpoint_shapes`), ``labels`` a name to the number
    of clusters its whole numbers index (one count for all its arrays, or one per array:
    :meth:`~fedprune.runs.RunDir.check_checkpoint_labels`). A name the checkpoint lacks is
    ``restore``'s to refuse (some are optional)."""

    shapes: Mapping[str, Sequence[tuple[int, ...]]] = dataclasses.field(default_factory=dict)
    labels: Mapping[str, int | Sequence[int]] = dataclasses.field(default_factory=dict)


class UnfitCheckpoint(Exception):  # noqa: N818 (a reason, turned into the run's DataError)
    """Raised by ``restore`` for a whole checkpoint that does not fit this run; its message
    says how ("does not fit this run (...)"), the loop names the file and what to do."""


class Algorithm(Generic[S]):
    """An algorithm as :func:`run_algorithm` runs it. Subclasses give :meth:`initial`,
    :meth:`restore`, :meth:`step` and :meth:`describe`, and where their checkpoint has a
    shape to check, :meth:`schema`. The class attributes are the loop's options: ``unit``
    of the progress bar (``"it"``: iterations), ``round_key`` the metrics column that numbers
    the rows, ``wall_column`` a metrics column that receives the run's wall time so far (s),
    ``total_option`` the option that set the total, named when a checkpoint is beyond it
    (default: ``--rounds``, or ``--max-iterations`` where the loop counts iterations)."""

    unit: str = "round"
    round_key: str = "round"
    wall_column: str | None = None
    total_option: str | None = None

    def describe(self, t: int) -> str:
        """The progress bar's description in round ``t``."""
        raise NotImplementedError

    def initial(self) -> S:
        """The state of a fresh run (only called without a checkpoint)."""
        raise NotImplementedError

    def schema(self, arrays: Arrays) -> Schema:
        """What a checkpoint's ``arrays`` must be for this run (default: nothing checked)."""
        return Schema()

    def restore(self, rounds_done: int, arrays: Arrays, scalars: Scalars) -> S:
        """The state a checkpoint after ``rounds_done`` rounds holds (it passed
        :meth:`schema`); a missing array is a ``KeyError``, a misfit :class:`UnfitCheckpoint`."""
        raise NotImplementedError

    def step(self, t: int, state: S) -> Step[S]:
        """Round ``t`` (1-based) from ``state``."""
        raise NotImplementedError

    def finished(self, state: S) -> bool:
        """Whether a restored state has already stopped early (then no step runs)."""
        return False


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


def run_algorithm(
    run: RunDir, algorithm: Algorithm[S], total: int, progress: bool = True
) -> RoundsResult[S]:
    """Run (or resume) rounds ``1..total`` of ``algorithm`` in ``run``; see the module text."""
    total_option = algorithm.total_option
    if total_option is None:
        total_option = "--rounds" if algorithm.unit == "round" else "--max-iterations"
    checkpoint = run.load_checkpoint(total, total_option)
    if checkpoint is None:
        done, state, clock = 0, algorithm.initial(), WallClock()
    else:
        done, arrays, scalars = checkpoint
        schema = algorithm.schema(arrays)
        run.check_checkpoint_shapes(arrays, schema.shapes)
        for name, count in schema.labels.items():
            run.check_checkpoint_labels(arrays, name, count)
        try:
            state = algorithm.restore(done, arrays, scalars)
        except KeyError as err:
            missing = repr(err.args[0]) if err.args else "an array"
            raise run.unusable_checkpoint(f"is damaged (it lacks {missing})") from None
        except IndexError:
            raise run.unusable_checkpoint("is damaged (a list of arrays is cut short)") from None
        except UnfitCheckpoint as err:
            raise run.unusable_checkpoint(str(err)) from None
        clock = WallClock(scalars.get("wall_s", 0.0))
    run.truncate_metrics(done, round_key=algorithm.round_key)
    bar = tqdm(total=total, initial=done, unit=algorithm.unit, disable=not progress)
    try:
        t = done
        while t < total and not algorithm.finished(state):
            t += 1
            bar.set_description(algorithm.describe(t))
            result = algorithm.step(t, state)
            state = result.state
            for row in result.rows:
                if algorithm.wall_column is not None:
                    row = {**row, algorithm.wall_column: round(clock.seconds(), 2)}
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


class _Functions(Algorithm[S]):
    """An :class:`Algorithm` made of the functions :func:`run_rounds` takes."""

    def __init__(
        self,
        initial: Callable[[], S],
        restore: Callable[[int, Arrays, Scalars], S],
        step: Callable[[int, S], Step[S]],
        desc: str | Callable[[int], str],
        finished: Callable[[S], bool],
        shapes: Callable[[Arrays], Mapping[str, Sequence[tuple[int, ...]]]] | None,
        **options: str | None,
    ):
        self.initial_state, self.restore_state, self.step_state = initial, restore, step
        self.desc, self.is_finished, self.shapes = desc, finished, shapes
        for name, value in options.items():  # unit, round_key, wall_column, total_option
            setattr(self, name, value)

    def describe(self, t: int) -> str:
        return self.desc(t) if callable(self.desc) else self.desc

    def initial(self) -> S:
        return self.initial_state()

    def schema(self, arrays: Arrays) -> Schema:
        return Schema() if self.shapes is None else Schema(self.shapes(arrays))

    def restore(self, rounds_done: int, arrays: Arrays, scalars: Scalars) -> S:
        return self.restore_state(rounds_done, arrays, scalars)

    def step(self, t: int, state: S) -> Step[S]:
        return self.step_state(t, state)

    def finished(self, state: S) -> bool:
        return self.is_finished(state)


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
    """:func:`run_algorithm` for an algorithm given as functions: ``initial()`` builds the
    state of a fresh run, ``restore(rounds_done, arrays, scalars)`` a checkpoint's, ``step(t,
    state)`` runs round ``t``; ``desc`` is the progress bar's description, or a function of
    the round; ``finished`` tells whether a restored state has already stopped early;
    ``shapes(arrays)`` gives the shapes a checkpoint's arrays must have (:class:`Schema`);
    ``unit``, ``round_key``, ``wall_column`` and ``total_option`` are :class:`Algorithm`'s
    options."""
    algorithm = _Functions(
        initial,
        restore,
        step,
        desc,
        finished,
        shapes,
        unit=unit,
        round_key=round_key,
        wall_column=wall_column,
        total_option=total_option,
    )
    return run_algorithm(run, algorithm, total, progress)
