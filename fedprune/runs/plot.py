"""``fedprune plot RUN...``: one PNG of runs' per-round curves, several runs overlaid.

Read from each run's ``metrics.csv``, which every run directory holds, one panel per kind of
number the runs have, in this order: accuracy, loss, sparsity, communication, clusters (K, ARI,
stability, communities). Where a round has one row per cluster, the curve is the mean over its
clusters, weighted by their clients where the rows give ``clients`` (the per-cluster curves are
in TensorBoard). The x axis is the round, or the iteration for methods that count iterations.
Imports no TensorFlow.

A point that is not a finite number (a round or a value of ``inf`` / ``nan``, a step that is
not a whole number, cluster rows whose ``clients`` sum to 0 or are not finite) is left out,
and one note line on stderr says how many and the first; names (columns, run folders) are
drawn as plain text, a ``$`` never starts matplotlib's mathtext.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

from fedprune.errors import ConfigError, DataError
from fedprune.runs import names
from fedprune.runs.events import STEP_COLUMNS, step_column
from fedprune.runs.files import write_figure
from fedprune.runs.run_dir import read_metrics

PLOT = "curves.png"
# (panel title, columns matching it), in panel order; a column goes to the first panel it
# matches
PANELS: tuple[tuple[str, re.Pattern], ...] = (
    ("accuracy", re.compile(r"(^|_)acc(uracy)?($|_)")),
    ("loss", re.compile(r"loss")),
    ("sparsity", re.compile(r"sparsity")),
    ("communication (MB)", re.compile(r"(comm_mb|_mb$)")),
    ("clusters", re.compile(r"^(clusters|communities|ari|stability|isolated)$")),
)


def _float(value: object) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number


def curves(
    rows: Sequence[Mapping], left_out: list[str] | None = None
) -> dict[str, tuple[list[int], list[float]]]:
    """column -> (steps, values) of a run's metrics rows, clusters of a step averaged.

    Points that cannot be drawn (module docstring) are left out; each is described in
    ``left_out`` (e.g. ``"round inf"``, ``"loss at round 3 is nan"``) when it is given."""
    skipped = [] if left_out is None else left_out
    by_step: dict[str, dict[int, list[tuple[float, float]]]] = defaultdict(dict)
    for row in rows:
        key = step_column(row)
        step = _float(row.get(key)) if key else None
        if step is None:
            continue
        if not math.isfinite(step) or step != int(step):
            skipped.append(f"{key} {row.get(key)}")
            continue
        cluster = _float(row.get("cluster"))
        weight = _float(row.get("clients")) or 1.0
        for column, value in row.items():
            number = _float(value)
            if column in STEP_COLUMNS or column in ("cluster", "clients") or number is None:
                continue
            points = by_step[column].setdefault(int(step), [])
            if cluster is not None and cluster < 0 and points:
                continue  # the all-clients row and cluster rows of one step: keep the clusters
            if not math.isfinite(number):
                skipped.append(f"{column} at {key} {int(step)} is {value}")
                continue
            points.append((number, weight))
    out = {}
    for column, steps in by_step.items():
        xs, ys = [], []
        for x in sorted(steps):
            if not steps[x]:  # its values were left out above
                continue
            total = math.fsum(w for _, w in steps[x])
            if not math.isfinite(total) or total <= 0:
                skipped.append(f"{column} at round {x}: its clusters' clients sum to {total:g}")
                continue
            xs.append(x)  # weighted mean over the step's rows
            ys.append(math.fsum(v * w for v, w in steps[x]) / total)
        if xs:
            out[column] = (xs, ys)
    return out


def plain(text: object) -> str:
    """``text`` as matplotlib draws it literally: ``$`` escaped, so ``price_$5_$10`` is not
    parsed as mathtext (which fails on it, or typesets it)."""
    return str(text).replace("$", r"\$")


def panel_of(column: str) -> str | None:
    for title, pattern in PANELS:
        if pattern.search(column):
            return title
    return None


def picture_path(out: str | os.PathLike) -> Path:
    """The PNG that ``--out`` names: ``out`` itself if it ends in ``.png``, ``out/curves.png``
    if it is a folder (or is written with a trailing ``/``); the folder it goes into must be
    one or be makeable (nothing on the way a file or a dangling link). Else one
    :class:`ConfigError`."""
    text = os.fspath(out)
    path = Path(text)
    if path.is_dir() or text.endswith(("/", os.sep)):
        path = path / PLOT
    elif path.suffix.lower() != ".png":
        raise ConfigError(f"--out {text}: give a .png file name or an existing folder")
    elif path.is_symlink() and not path.exists():
        raise ConfigError(
            f"--out {text} is a symbolic link to {os.readlink(path)!r}, which does not exist; "
            "remove it or choose another --out"
        )
    folder = path.parent
    while not folder.exists():
        if folder.is_symlink():
            raise ConfigError(
                f"--out {text}: {folder} is a symbolic link to {os.readlink(folder)!r}, which "
                "does not exist; make that folder or choose another --out"
            )
        folder = folder.parent
    if not folder.is_dir():
        raise ConfigError(
            f"--out {text}: {folder} is a file, so the folder cannot be made; choose another --out"
        )
    return path


def plot_runs(runs: Sequence[str | os.PathLike], out: str | os.PathLike) -> Path:
    """Draw the runs' curves into the PNG ``out`` (:func:`picture_path`: a ``.png`` name or
    a folder); returns its path. One clear error for a folder that is not a run or has no
    rounds yet. The picture is written to a temporary name and renamed."""
    out = picture_path(out)
    loaded, steps = [], set()
    for run in runs:
        path = Path(run)
        metrics = path / names.METRICS
        if not path.is_dir() or not (path / names.CONFIG).exists():
            raise DataError(
                f"{path} is not a fedprune run directory (no {names.CONFIG}); pass the --out of "
                "a run"
            )
        if not metrics.exists():
            raise DataError(f"{path} has no {names.METRICS} yet: no round has finished")
        rows = read_metrics(metrics)
        steps.add(step_column(rows[0]) if rows else "round")
        left_out: list[str] = []
        loaded.append((path, curves(rows, left_out)))
        if left_out:
            print(
                f"fedprune: note: {metrics}: {len(left_out)} point{'s' * (len(left_out) > 1)} "
                f"left out of the plot, not finite numbers (first: {left_out[0]})",
                file=sys.stderr,
            )
    titles = [t for t, _ in PANELS if any(panel_of(c) == t for _, cs in loaded for c in cs)]
    if not titles:
        raise DataError(f"{', '.join(map(str, runs))}: no per-round numbers to plot")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(len(titles), 3)
    rows = (len(titles) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    several = len(loaded) > 1
    for ax, title in zip(axes.flat, titles):
        for path, run_curves in loaded:
            for column, (xs, ys) in sorted(run_curves.items()):
                if panel_of(column) != title:
                    continue
                label = f"{path.name}: {column}" if several else column
                ax.plot(xs, ys, marker="." if len(xs) < 30 else None, label=plain(label))
        ax.set_title(title)
        ax.set_xlabel("iteration" if steps == {"iteration"} else "round")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(titles) :]:
        ax.set_visible(False)
    fig.suptitle(plain(", ".join(p.name for p, _ in loaded)))
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        write_figure(out, fig, dpi=110)
    finally:
        plt.close(fig)
    return out
