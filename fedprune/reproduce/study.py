"""A study: a grid of training points, each trained once per seed by ``fedprune train``, and
one table of what was measured next to the paper's values, a figure, the paper's claims
checked on our numbers, and the data files' sha256.

The CA-AFP robustness studies (``fedprune reproduce score-ablation|phases|finetune|noniid``)
are each a :class:`Study`: its points, how to read a run's ``summary.json``, the paper's
values (``paper_values/NAME_paper.csv``), its claims and its figure. Training goes through
:mod:`fedprune.reproduce.runner`, so finished runs are kept and interrupted ones resume; a
point shared by two parts of a study (same method and arguments) is trained once.

A point may instead be *fine-tuned again* from a base run (:class:`FineTuneAgain`): the base
is trained first (it may be a run another reproduction already made, e.g. Table 2's, in the
same ``<out>/runs``), then ``fedprune finetune`` (:mod:`fedprune.algorithms.refinetune`)
fine-tunes it for the point's lengths into the point's own run directory, so the same
federated rounds are never trained twice. A point whose run directory already holds a
finished run is skipped, however it was made.

A study may also work on each run once it is trained (:attr:`Study.after_run`, e.g. the
device study exports every run's models and measures them): called for every run directory
of the grid after training, ``--jobs`` at a time (``auto``: one at a time), it skips what an
earlier invocation finished, as training does, and what it returns reaches ``measure`` as
the run summary's ``after_run``, revised by :attr:`Study.after_all` where a step needs every
run at once.

How a study publishes its table is its own, within one pipeline (:func:`reproduce`): runs →
``measure`` → means over seeds (:func:`collect`, with 95 % CIs for :attr:`Study.intervals`)
→ the paper's values (:func:`join_paper`) → :attr:`Study.publish` (the row as published) →
``NAME.csv`` (:attr:`Study.columns`), ``NAME.png`` (:attr:`Study.plot`), the markdown page
(:attr:`Study.page`, by default :func:`default_page`: the command, seeds and training time,
``body``, the claims, the data files) and further files (:attr:`Study.more_files`). Table 2
and FedCRef keep the run folders, file names and page layout they had before they were
Studies through these hooks (:attr:`Point.name`, :attr:`Study.runs`, :attr:`Study.files`,
:attr:`Study.quick_files`), so their archived runs render the same tables byte for byte.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from fedprune.data import sources
from fedprune.errors import ConfigError, DataError
from fedprune.reproduce import runner
from fedprune.runs.files import atomic_file, write_figure, write_text
from fedprune.runs.finished import is_finished, open_finished

# the papers' values (package data, so that the studies work from an installed wheel)
PAPER_VALUES = Path(__file__).resolve().parent / "paper_values"
Labels = tuple[tuple[str, str], ...]


@dataclasses.dataclass(frozen=True)
class FineTuneAgain:
    """How a point is made from a base run: the base, ``<out>/runs/<base>-s<seed>``, is
    trained by ``fedprune train <point's method> <args>``, then fine-tuned again for
    ``ft_epochs``."""

    base: str
    args: tuple[str, ...]
    ft_epochs: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Point:
    """One configuration of a study, trained once per seed: its coordinates in the study's
    table (``labels``, in column order, as text), and the ``fedprune train`` method and
    arguments (without ``--seed``/``--out``/``--data-dir``) that would train it directly
    (and name its run directory). With ``again`` it is made from a base run instead (the
    module docstring)."""

    labels: Labels
    method: str
    args: tuple[str, ...]
    again: FineTuneAgain | None = None
    # the run directory's name without ``-s<seed>`` where it is not derived from the method
    # and arguments: runs named before their study was a Study, which other studies share
    # (Table 2's ``fedchar-wisdm``, FedCRef's ``fedcref-mnist-d0.3``)
    name: str = ""

    @property
    def stem(self) -> str:
        """The run directory's name without the seed: :attr:`name`, else the method and its
        arguments, so two points with the same training share one directory."""
        if self.name:
            return self.name
        text = "_".join([self.method, *(a.lstrip("-") for a in self.args)])
        return re.sub(r"[^A-Za-z0-9.]+", "_", text).strip("_")

    def label(self, column: str) -> str:
        return dict(self.labels)[column]


@dataclasses.dataclass(frozen=True)
class Claim:
    """One of the paper's statements, checked on our numbers."""

    text: str
    holds: bool | None  # None: not enough points to check (e.g. a --quick grid)
    evidence: str


@dataclasses.dataclass(frozen=True)
class Study:
    """What a reproduction target trains and reports; see the module docstring.

    ``measure(summary)`` turns one run's summary into rows: ``(extra labels, values)``,
    e.g. one row per fine-tuning epoch count; a value is a number, ``None`` (not measured)
    or a text (e.g. the CPU a time was measured on). ``paper_columns`` maps a measured value to the
    column of ``paper_values/NAME_paper.csv`` that holds the paper's value, matched on the
    label columns (a label may map to a text column: FedCRef's ``dataset`` to the paper's
    name of the dataset). ``claims(rows)`` and ``plot(rows, path)`` work on the aggregated
    rows; ``plot`` may be ``None`` (no ``NAME.png``).

    The fields after ``after_run`` shape the outputs (module docstring); their defaults give
    every study the same layout: runs in ``<out>/runs``, files ``NAME.*`` (``NAME_quick.*``
    for ``--quick``), every column in the CSV, the :func:`default_page`.
    """

    name: str
    title: str
    datasets: tuple[str, ...]
    default_seeds: int
    points: Callable[[bool], list[Point]]
    measure: Callable[[dict], list[tuple[Labels, dict[str, float | str | None]]]]
    paper_columns: dict[str, str]
    claims: Callable[[list[dict]], list[Claim]]
    plot: Callable[[list[dict], Path], None] | None
    body: Callable[[list[dict]], list[str]]  # the markdown tables
    notes: tuple[str, ...] = ()
    quick_seeds: int = 1  # seeds of a --quick run (0, 1, ...)
    shared_process: bool = False  # runs in long-lived processes (runner.run_jobs)
    # learning curves: ``curves(points, round_values(...), png)`` draws ``NAME_curves.png``
    # from the ``curve_columns`` of the runs' ``metrics.csv``
    curves: Callable[[list[Point], dict[Labels, dict[str, np.ndarray]], Path], None] | None = None
    curve_columns: tuple[str, ...] = ()
    from_paper: bool = True  # False: fedprune's own study, no paper_values/NAME_paper.csv
    # a step after training, per run: ``after_run(run_dir, data_dir)`` is called once for
    # every run directory of the grid when all are trained (the module docstring); it skips
    # what an earlier invocation finished and returns what it measured, which ``measure``
    # finds in ``summary["after_run"]``
    after_run: Callable[[Path, str | None], dict] | None = None
    # ``after_all(found)``: once every ``after_run`` has returned (``found``: by run
    # directory), what they returned revised by a step that needs all runs at once (the
    # device study times every exported file in one pass)
    after_all: Callable[[dict[Path, dict]], dict[Path, dict]] | None = None
    runs: str = "runs"  # the folder under ``--out`` that holds the grid's run directories
    files: str = ""  # the output files' stem (default: the name, "-" as "_")
    quick_files: bool = True  # --quick writes ``<files>_quick.*``; False: the same names
    # measured values that get ``NAME_ci``, the half-width of the 95 % Student's t interval
    # of their mean over the seeds (:func:`fedprune.reproduce.intervals.mean_ci`)
    intervals: tuple[str, ...] = ()
    # ``publish(row)``: the row as the CSV and the page show it, from the row of means and
    # paper values (e.g. renamed columns, or verdicts against the paper's intervals)
    publish: Callable[[dict], dict] | None = None
    columns: tuple[str, ...] = ()  # the CSV's columns, in order (default: every column)
    # ``page(report)``: the markdown page's lines, in place of :func:`default_page`
    page: Callable[[Report], list[str]] | None = None
    # ``more_files(report)``: writes further files once the CSV, figure and page are written
    more_files: Callable[[Report], None] | None = None

    @property
    def paper_csv(self) -> Path:
        return PAPER_VALUES / f"{self.name.replace('-', '_')}_paper.csv"

    @property
    def file_stem(self) -> str:
        return self.files or self.name.replace("-", "_")


@dataclasses.dataclass(frozen=True)
class Report:
    """What one invocation of :func:`reproduce` made, for a study's :attr:`Study.page` and
    :attr:`Study.more_files`: the published ``table``, where the outputs are (``out``,
    ``stem``: the files' stem with ``_quick`` where it applies), the data ``files`` (path,
    sha256), ``wall_s`` (this invocation: training and ``after_run``), ``runs_wall_s`` (the
    runs' own wall times summed, each distinct run once) and ``checks`` (e.g.
    :func:`again_agreement`)."""

    study: Study
    out: Path
    stem: str
    points: tuple[Point, ...]
    seeds: tuple[int, ...]
    quick: bool
    table: list[dict]
    files: tuple[tuple[str, str], ...]
    wall_s: float
    runs_wall_s: float
    checks: tuple[Claim, ...] = ()

    @property
    def markdown(self) -> Path:
        return self.out / f"{self.stem}.md"

    def run_dir(self, point: Point, seed: int) -> Path:
        return run_dir(self.out, self.study, point, seed)


def run_dir(out: Path, study: Study, point: Point, seed: int) -> Path:
    return out / study.runs / f"{point.stem}-s{seed}"


def unique_points(points: Sequence[Point]) -> list[Point]:
    """The points with distinct training (method and arguments), first occurrence kept."""
    seen, kept = set(), []
    for p in points:
        if p.stem not in seen:
            seen.add(p.stem)
            kept.append(p)
    return kept


def base_dir(out: Path, again: FineTuneAgain, seed: int) -> Path:
    return out / "runs" / f"{again.base}-s{seed}"


def jobs(
    study: Study, points: Sequence[Point], seeds: Sequence[int], out: Path, data_dir: str | None
) -> tuple[list[runner.Job], list[runner.Job]]:
    """(base runs, point runs): one point job per distinct point and seed (see
    :func:`unique_points`), trained directly or fine-tuned again from its base; a base is
    listed once, and only for points whose run directory has not finished."""
    extra = ("--data-dir", data_dir) if data_dir else ()
    bases: dict[Path, runner.Job] = {}
    todo = []
    for s in seeds:
        for p in unique_points(points):
            label = f"{study.name} {', '.join(f'{k} {v}' for k, v in p.labels)} seed {s}"
            target = run_dir(out, study, p, s)
            if p.again is None:
                command = runner.train_command(p.method, target, *p.args, "--seed", str(s), *extra)
                todo.append(runner.Job(label, command, target))
                continue
            base = base_dir(out, p.again, s)
            if not is_finished(target) and base not in bases:
                command = runner.train_command(
                    p.method, base, *p.again.args, "--seed", str(s), *extra
                )
                bases[base] = runner.Job(f"{p.again.base} seed {s} (base)", command, base)
            lengths = ",".join(map(str, p.again.ft_epochs))
            command = runner.finetune_command(base, target, lengths, *extra)
            todo.append(runner.Job(f"{label} (fine-tuned again)", command, target))
    return list(bases.values()), todo


def collect(
    study: Study,
    points: Sequence[Point],
    seeds: Sequence[int],
    out: Path,
    after: dict[Path, dict] | None = None,
) -> list[dict]:
    """One row per point (and extra labels from ``measure``): every measured value's mean
    and population std over the seeds (``NAME``, ``NAME_std``; a text value: its distinct
    texts joined by "; "; ``NAME_ci`` too for :attr:`Study.intervals`), ``seeds`` and the
    runs' summed wall time ``wall_s``. ``after``:
    what :attr:`Study.after_run` returned per run directory (:func:`after_runs`), given to
    ``measure`` as the summary's ``after_run``."""
    rows: dict[Labels, dict] = {}
    for p in points:
        for s in seeds:
            path = run_dir(out, study, p, s)
            summary = open_finished(path).summary
            if after is not None and path in after:
                summary = {**summary, "after_run": after[path]}
            measured = study.measure(summary)
            for extra, values in measured:  # a run's wall time is shared by its rows
                row = rows.setdefault(p.labels + extra, {"_values": {}, "wall_s": 0.0})
                row["wall_s"] += float(summary.get("wall_s", 0.0)) / len(measured)
                for name, value in values.items():
                    row["_values"].setdefault(name, []).append(value)
    table = []
    for labels, row in rows.items():
        entry: dict = dict(labels)
        for name, values in row.pop("_values").items():
            known = [v for v in values if v is not None]
            if known and all(isinstance(v, str) for v in known):
                entry[name] = "; ".join(dict.fromkeys(known))
                continue
            entry[name] = float(np.mean(known)) if known else None
            entry[f"{name}_std"] = float(np.std(known)) if len(known) > 1 else None
            if name in study.intervals:
                from fedprune.reproduce.intervals import mean_ci

                entry[f"{name}_ci"] = mean_ci(known)[1] if known else None
        entry["seeds"] = len(seeds)
        entry["wall_s"] = row["wall_s"]
        table.append(entry)
    return table


def after_runs(
    study: Study,
    points: Sequence[Point],
    seeds: Sequence[int],
    out: Path,
    data_dir: str | None,
    parallel: int | str = 1,
) -> tuple[dict[Path, dict], float]:
    """:attr:`Study.after_run` of every distinct run directory of the grid (none without
    it), ``parallel`` runs at a time (``"auto"``: one; its load policy is training's),
    revised by :attr:`Study.after_all`, and the wall time it took (s). The first step that
    fails, or Ctrl-C, stops the rest from starting; ``found`` keeps the grid's order."""
    start = time.perf_counter()
    if study.after_run is None:
        return {}, 0.0
    paths = [run_dir(out, study, p, s) for s in seeds for p in unique_points(points)]
    workers = 1 if parallel == runner.AUTO else max(1, int(parallel))
    if workers == 1:
        found = {path: study.after_run(path, data_dir) for path in paths}
    else:
        stop = threading.Event()

        def step(path: Path) -> dict | None:
            if stop.is_set():  # an earlier step failed: start no more
                return None
            try:
                return study.after_run(path, data_dir)
            except BaseException:
                stop.set()
                raise

        with ThreadPoolExecutor(workers) as pool:
            futures = [pool.submit(step, path) for path in paths]
            try:
                found = {path: future.result() for path, future in zip(paths, futures)}
            except BaseException:  # a failed step, or Ctrl-C here: start none of the rest
                stop.set()
                raise
    if study.after_all is not None:
        found = study.after_all(found)
    return found, time.perf_counter() - start


def round_values(
    study: Study, points: Sequence[Point], seeds: Sequence[int], out: Path, columns: Sequence[str]
) -> dict[Labels, dict[str, np.ndarray]]:
    """Per point, each of ``columns`` per round from its runs' ``metrics.csv``: an array of
    shape (seeds, rounds) in seed order; an empty cell (a value the round did not have, such
    as the rank in a warm-up round) is NaN. The seeds' runs of one point must have the same
    number of rounds, and a column a run lacks is a :class:`DataError`."""
    found: dict[Labels, dict[str, np.ndarray]] = {}
    for p in points:
        runs = [open_finished(run_dir(out, study, p, s)) for s in seeds]
        metrics = [r.metrics() for r in runs]
        if len({len(m) for m in metrics}) > 1:
            lengths = ", ".join(f"{r.path} {len(m)}" for r, m in zip(runs, metrics))
            raise DataError(
                f"{p.stem}: the seeds' runs have different round counts ({lengths}); delete "
                "the run that differs and run the same command again to retrain it"
            )
        values = {}
        for column in columns:
            lacking = [str(r.path) for r, m in zip(runs, metrics) if m and column not in m[0]]
            if lacking:
                raise DataError(
                    f"{', '.join(lacking)}: metrics.csv has no column {column!r} (an older "
                    "fedprune's run?); delete it and run the same command again to retrain it"
                )
            values[column] = np.array(
                [[float(row[column]) if row[column] else np.nan for row in m] for m in metrics]
            )
        found[p.labels] = values
    return found


def again_agreement(
    study: Study, points: Sequence[Point], seeds: Sequence[int], out: Path
) -> Claim | None:
    """Whether every point fine-tuned again continued its base run's trajectory: at the
    lengths the base evaluated itself (Table 2's 3 and 25), the point's accuracy and
    fairness must equal the base's exactly. ``None`` without such points."""
    pairs, unequal = 0, []
    for p in points:
        if p.again is None:
            continue
        for s in seeds:
            base = open_finished(base_dir(out, p.again, s)).summary.get("finetune", {})
            again = open_finished(run_dir(out, study, p, s)).summary["finetune"]
            for length in sorted(set(base) & set(again), key=int):
                pairs += 1
                if any(base[length][k] != again[length][k] for k in ("avg_acc", "fairness")):
                    unequal.append(f"{p.again.base} seed {s} FT {length}")
    if not pairs:
        return None
    return Claim(
        "fine-tuned again from the base (Table 2) runs: at the bases' own lengths accuracy "
        "and fairness equal the bases' exactly",
        not unequal,
        f"{pairs - len(unequal)} of {pairs} (method, seed, length) pairs equal"
        + (f"; unequal: {', '.join(unequal)}" if unequal else ""),
    )


def read_paper(path: Path) -> list[dict]:
    """The paper's values: label columns as text, numbers as floats (empty: None)."""
    if not path.is_file():
        raise ConfigError(f"the paper's values are missing: {path} (restore it from git)")
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def join_paper(study: Study, table: list[dict]) -> list[dict]:
    """Each row with ``paper_NAME`` and ``diff_NAME`` (ours − paper) for every measured value
    the paper reports, matched on the label columns the paper's CSV has. A paper's value that
    is not a number (a name) is kept as text, without a difference."""
    if not study.from_paper:  # a study of our own: no paper to compare with
        return table
    paper = read_paper(study.paper_csv)
    for row in table:
        match = None
        for p in paper:
            keys = [k for k in p if k in row and k not in study.paper_columns.values()]
            if keys and all(str(row[k]) == p[k] for k in keys):
                match = p
                break
        for ours, theirs in study.paper_columns.items():
            value = _paper_value(match.get(theirs)) if match else None
            row[f"paper_{ours}"] = value
            mine = row.get(ours)
            numbers = isinstance(value, float) and isinstance(mine, int | float)
            row[f"diff_{ours}"] = mine - value if numbers else None
    return table


def _paper_value(text: str | None) -> float | str | None:
    """A cell of a paper's CSV: a number, a text (a name), or None where it is empty."""
    if text in (None, ""):
        return None
    try:
        return float(text)
    except ValueError:
        return text


def data_files(datasets: Sequence[str], data_dir: str | None) -> list[tuple[str, str]]:
    """(path, sha256) of each dataset's files (an image dataset: both splits' images and
    labels), downloading a missing one with its checksum as ``fedprune data`` does, so a
    reproduction on a fresh machine fetches its own data; a file that is missing and cannot
    be fetched is one error line, before any training."""
    from fedprune.data import images, uci_tabular

    paths = []
    for name in datasets:
        if name in uci_tabular.TABULAR_NAMES:
            folder = sources.require_data_dir(data_dir)
            paths += [
                sources.locate_source(source, folder) for source in uci_tabular.file_sources(name)
            ]
        elif name in images.NAMES:
            folder = sources.require_data_dir(data_dir)
            paths += [
                sources.locate_source(images.file_source(name, split, role), folder)
                for split in images.SPLITS
                for role in ("images", "labels")
            ]
        else:
            paths.append(sources.locate(name, data_dir))
    unique = list(dict.fromkeys(paths))
    return [(str(p), sources.sha256_of(p) if p.is_file() else "(directory)") for p in unique]


def _cell(value: object, percent: bool) -> str:
    if value is None:
        return "–"
    if isinstance(value, str):
        return value
    return f"{100 * value:.2f}" if percent else f"{value:.2f}"


def write_csv(table: list[dict], path: Path, columns: Sequence[str] = ()) -> None:
    """The table as CSV: ``columns`` in order (other keys left out), by default every key of
    the rows in order of appearance; ``None`` is an empty cell."""
    columns = list(columns) or list(dict.fromkeys(k for row in table for k in row))
    with atomic_file(path, text=True) as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(table)


def row_of(table: list[dict], **labels: object) -> dict | None:
    """The first row whose label columns equal ``labels`` (compared as text, as the table
    holds them), or None: e.g. ``row_of(table, method="caafp", ft=25)``."""
    for r in table:
        if all(r.get(k) == str(v) for k, v in labels.items()):
            return r
    return None


def value_of(table: list[dict], name: str = "acc", **labels: object) -> float | None:
    """One measured value of the row :func:`row_of` finds; None where there is no row."""
    row = row_of(table, **labels)
    return None if row is None else row.get(name)


def near_paper(what: str, ours: float, paper: float, tolerance: float) -> Claim:
    """The claim "``what`` is about the paper's value", held when within ``tolerance``
    (all three as fractions; shown in percent)."""
    return Claim(
        f"{what} at about {100 * paper:.0f} % (within {100 * tolerance:g} pp)",
        abs(ours - paper) <= tolerance,
        f"ours {100 * ours:.1f} %",
    )


def accuracy_section(heading: str, table: list[dict], labels: Sequence[str]) -> list[str]:
    """A heading and the table of accuracy and fairness (ours, paper's, difference)."""
    return [
        f"## {heading}",
        "",
        *markdown_table(table, labels, (("acc", "acc %", True), ("fairness", "fairness %", True))),
    ]


@contextmanager
def figure(path: Path, ncols: int = 1, **subplots: object) -> Iterator[tuple[object, object]]:
    """A matplotlib figure (headless backend) whose ``(fig, axes)`` the body draws on; saved
    to ``path`` at 120 dpi and closed when the body ends."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, **subplots)
    try:
        yield fig, axes
        fig.tight_layout()
        write_figure(path, fig, dpi=120)
    finally:
        plt.close(fig)


def grouped_bars(
    ax: object,
    groups: Sequence[str],
    series: Sequence[tuple[str, Sequence[float | None], Sequence[float] | None]],
) -> None:
    """Bars of several series side by side within each group: ``series`` is (label, one value
    per group, None where there is none, and optional error bars); groups are the ticks."""
    width = 0.8 / len(series)
    for i, (label, values, errors) in enumerate(series):
        shown = [j for j, v in enumerate(values) if v is not None]
        xs = [j + (i - len(series) / 2 + 0.5) * width for j in shown]
        errs = [errors[j] for j in shown] if errors is not None else None
        ax.bar(xs, [values[j] for j in shown], width, yerr=errs, capsize=2, label=label)
    ax.set_xticks(range(len(groups)), list(groups))
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)


def markdown_table(
    table: list[dict], labels: Sequence[str], values: Sequence[tuple[str, str, bool]]
) -> list[str]:
    """A markdown table: the label columns, then per measured value (name, header, percent)
    ours (± std over seeds), the paper's and the difference where the paper has one."""
    header, rule = list(labels), ["---"] * len(labels)
    for name, title, _ in values:
        header.append(title)
        if any(f"paper_{name}" in r for r in table):
            header += ["paper", "diff"]
    rule = ["---"] * len(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(rule) + "|"]
    for r in table:
        cells = [str(r.get(k, "")) for k in labels]
        for name, _, percent in values:
            cell = _cell(r.get(name), percent)
            if r.get(f"{name}_std") is not None:
                cell += f" ± {_cell(r[f'{name}_std'], percent)}"
            cells.append(cell)
            if any(f"paper_{name}" in row for row in table):
                cells += [_cell(r.get(f"paper_{name}"), percent)]
                diff = r.get(f"diff_{name}")
                cells += ["–" if diff is None else f"{(100 if percent else 1) * diff:+.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def write_markdown(
    study: Study,
    table: list[dict],
    path: Path,
    body: list[str],
    seeds: Sequence[int],
    quick: bool,
    files: list[tuple[str, str]],
    wall_s: float,
    checks: Sequence[Claim] = (),
) -> None:
    """The :func:`default_page` of ``table`` with ``body`` as its tables, written to ``path``;
    ``checks``: the run's own consistency checks (e.g. :func:`again_agreement`), listed apart
    from the paper's claims."""
    report = Report(
        study,
        path.parent,
        path.stem,
        (),
        tuple(seeds),
        quick,
        table,
        tuple(files),
        wall_s,
        sum(r["wall_s"] for r in table),
        tuple(checks),
    )
    write_text(path, "\n".join(default_page(report, body)) + "\n")


def default_page(report: Report, body: Sequence[str] | None = None) -> list[str]:
    """A study's markdown page: the title; the command, seeds and training time (the rows'
    ``wall_s`` summed); the learning-curves figure where there is one; ``body`` (default:
    ``study.body(table)``); the paper's claims on our numbers; the run's checks; the notes;
    the data files' sha256."""
    study, table, seeds, quick = report.study, report.table, report.seeds, report.quick
    runs_wall = sum(r["wall_s"] for r in table)
    claims = study.claims(table)

    def bullet(c: Claim) -> str:
        verdict = "holds" if c.holds else "does not hold" if c.holds is False else "not checked"
        return f"* {c.text}: **{verdict}** ({c.evidence})"

    return [
        f"# {study.title}",
        "",
        f"`fedprune reproduce {study.name}{' --quick' if quick else ''}` "
        f"(`make reproduce-{study.name}{'-quick' if quick else ''}`). Seeds: "
        f"{', '.join(map(str, seeds))}"
        + (" (**--quick**: a smaller grid, see the docs page)" if quick else "")
        + f". Training: {runs_wall / 60:.1f} min summed over the runs' own wall times "
        f"({report.wall_s / 60:.1f} min in this invocation, which skips finished runs).",
        "",
        *(
            [f"Learning curves (per round, mean ± std over seeds): `{report.stem}_curves.png`.", ""]
            if study.curves
            else []
        ),
        *(study.body(table) if body is None else body),
        "",
        "## The paper's claims on our numbers" if study.from_paper else "## The goals",
        "",
        *map(bullet, claims),
        *(
            ["", "## Checks of this reproduction", "", *map(bullet, report.checks)]
            if report.checks
            else []
        ),
        *(["", *study.notes] if study.notes else []),
        "",
        "Data files used:",
        *[f"* `{p}` sha256 `{h}`" for p, h in report.files],
    ]


def runs_wall_time(study: Study, points: Sequence[Point], seeds: Sequence[int], out: Path) -> float:
    """The finished runs' own wall times (``summary.json``'s ``wall_s``) summed, each distinct
    run directory once."""
    return sum(
        float(open_finished(run_dir(out, study, p, s)).summary.get("wall_s", 0.0))
        for s in seeds
        for p in unique_points(points)
    )


def reproduce(
    study: Study,
    out: str | Path = "results",
    quick: bool = False,
    seeds: int | None = None,
    data_dir: str | None = None,
    parallel: int | str = 1,
) -> Path:
    """Train what is missing, then write ``NAME.csv``, ``NAME.md`` and ``NAME.png`` (and
    ``NAME_curves.png`` for a study with learning curves) under ``out``; returns the
    markdown's path (see :func:`produce`)."""
    return produce(study, out, quick, seeds, data_dir, parallel).markdown


def produce(
    study: Study,
    out: str | Path = "results",
    quick: bool = False,
    seeds: int | None = None,
    data_dir: str | None = None,
    parallel: int | str = 1,
) -> Report:
    """:func:`reproduce`, returning the :class:`Report` it wrote."""
    out = Path(out)
    seed_list = list(range(study.quick_seeds if quick else seeds or study.default_seeds))
    files = data_files(study.datasets, data_dir)  # fetches what is missing, else one line
    if study.from_paper:
        read_paper(study.paper_csv)
    out.mkdir(parents=True, exist_ok=True)
    points = study.points(quick)
    if quick:
        smaller = len(points) < len(study.points(False))
        print(
            f"QUICK reproduction: seeds {', '.join(map(str, seed_list))}"
            + (f" and a smaller grid ({len(points)} points)." if smaller else "."),
            file=sys.stderr,
        )
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    bases, todo = jobs(study, points, seed_list, out, data_dir)
    wall = runner.run_jobs(bases, parallel, shared=study.shared_process)
    wall += runner.run_jobs(todo, parallel, shared=study.shared_process)
    after, after_wall = after_runs(study, points, seed_list, out, data_dir, parallel)
    wall += after_wall
    table = join_paper(study, collect(study, points, seed_list, out, after))
    if study.publish is not None:
        table = [study.publish(row) for row in table]
    stem = study.file_stem + ("_quick" if quick and study.quick_files else "")
    write_csv(table, out / f"{stem}.csv", study.columns)
    if study.plot is not None:
        study.plot(table, out / f"{stem}.png")
    if study.curves:
        curves = round_values(study, points, seed_list, out, study.curve_columns)
        study.curves(points, curves, out / f"{stem}_curves.png")
    agreement = again_agreement(study, points, seed_list, out)
    report = Report(
        study,
        out,
        stem,
        tuple(points),
        tuple(seed_list),
        quick,
        table,
        tuple(files),
        wall,
        runs_wall_time(study, points, seed_list, out),
        (agreement,) if agreement else (),
    )
    write_text(report.markdown, "\n".join((study.page or default_page)(report)) + "\n")
    if study.more_files is not None:
        study.more_files(report)
    return report
