"""``fedprune reproduce table2``: Table 2 of the CA-AFP paper on the real data.

Every (method, dataset, seed) is an ordinary run directory under ``<out>/runs/`` (time-ordered
split, the default) or ``<out>/runs-random/`` (``--split random``: the leaking split of older
fedprune versions, kept to measure the leak), trained by a ``fedprune train`` subprocess;
a finished run is never recomputed and an interrupted one resumes from its last round, so the
whole reproduction resumes after an interruption. The
table aggregates the runs over seeds, one line per (method, dataset, fine-tuning epochs), next
to the paper's values (``paper_values/table2_paper.csv``), and a plot shows accuracy against
communication.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import sys
from pathlib import Path

import numpy as np

from fedprune.reproduce import runner, study
from fedprune.runs.files import atomic_file, write_figure, write_text
from fedprune.runs.finished import finished_summary, open_finished

PAPER_VALUES = Path(__file__).resolve().parent / "paper_values" / "table2_paper.csv"
DATASETS = ("wisdm", "uci_har")
FT_EPOCHS = (3, 25)


@dataclasses.dataclass(frozen=True)
class Row:
    """A Table 2 row: a method name and the ``fedprune train`` arguments that produce it."""

    name: str
    method: str
    args: tuple[str, ...] = ()


ROWS = (
    Row("fedchar", "fedchar"),
    Row("clusterfl", "clusterfl"),
    Row("efficientfl", "efficientfl"),
    Row("fedsnip", "fedsnip"),
    Row("caafp_0_0_50", "caafp", ("--phases", "0,0,50")),
    Row("caafp_15_15_20", "caafp", ("--phases", "15,15,20")),
)
MISSING: dict[str, str] = {}  # rows of the paper we cannot produce, with the reason
COLUMNS = (
    "method",
    "dataset",
    "ft_epochs",
    "seeds",
    "avg_acc_mean",
    "avg_acc_std",
    "fairness_mean",
    "comm_mib_eq13_paper",
    "comm_mb_eq13",
    "comm_mb_payload",
    "sparsity",
    "paper_avg_acc",
    "paper_fairness",
    "paper_comm_mb",
)


SPLIT_DIRS = {"time-ordered": "runs", "random": "runs-random"}
SPLIT_SUFFIX = {"time-ordered": "", "random": "_random"}  # of table2{suffix}.md/.csv/.png
LEAK = "table2_leak.md"  # written once both splits' tables exist


def run_dir(out: Path, row: Row, dataset: str, seed: int, split: str = "time-ordered") -> Path:
    return out / SPLIT_DIRS[split] / f"{row.name}-{dataset}-s{seed}"


def row_arguments(row: Row, dataset: str, split: str = "time-ordered") -> tuple[str, ...]:
    """The ``fedprune train`` arguments of ``row`` on ``dataset`` but the seed, output and
    data folder; other reproductions train with them to share Table 2's runs."""
    return (
        "--dataset",
        dataset,
        "--split",
        split,
        "--ft-epochs",
        ",".join(map(str, FT_EPOCHS)),
        *row.args,
    )


def train_command(
    row: Row,
    dataset: str,
    seed: int,
    out: Path,
    data_dir: str | None,
    split: str = "time-ordered",
) -> list[str]:
    args = [
        *row_arguments(row, dataset, split),
        "--seed",
        str(seed),
        *(["--data-dir", data_dir] if data_dir else []),
    ]
    target = run_dir(out, row, dataset, seed, split)
    return list(runner.train_command(row.method, target, *args))


def run_all(
    out: Path,
    seeds: list[int],
    data_dir: str | None,
    rows: tuple[Row, ...] = ROWS,
    datasets: tuple[str, ...] = DATASETS,
    jobs: int | str = 1,
    split: str = "time-ordered",
) -> float:
    """Train every missing run (see :mod:`fedprune.reproduce.runner`); returns the wall time."""
    todo = [
        runner.Job(
            f"{r.name} {d} seed {s}" + ("" if split == "time-ordered" else f" ({split} split)"),
            tuple(train_command(r, d, s, out, data_dir, split)),
            run_dir(out, r, d, s, split),
        )
        for s in seeds
        for d in datasets
        for r in rows
    ]
    return runner.run_jobs(todo, jobs)


def paper_values(path: Path = PAPER_VALUES) -> dict[tuple[str, str, int], dict]:
    with open(path, newline="") as f:
        return {(r["method"], r["dataset"], int(r["ft_epochs"])): r for r in csv.DictReader(f)}


def aggregate(
    out: Path,
    seeds: list[int],
    rows: tuple[Row, ...] = ROWS,
    datasets: tuple[str, ...] = DATASETS,
    split: str = "time-ordered",
) -> list[dict]:
    """One dict per (method, dataset, ft_epochs), over the seeds whose runs finished."""
    paper = paper_values()
    table = []
    for dataset in datasets:
        for name in [r.name for r in rows] + list(MISSING):
            row = next((r for r in rows if r.name == name), None)
            summaries = []
            if row is not None:
                found = (finished_summary(run_dir(out, row, dataset, s, split)) for s in seeds)
                summaries = [summary for summary in found if summary is not None]
            for e in FT_EPOCHS:
                p = paper.get((name, dataset, e), {})
                accs = [s["finetune"][str(e)]["avg_acc"] for s in summaries]
                entry = {
                    "method": name,
                    "dataset": dataset,
                    "ft_epochs": e,
                    "seeds": len(summaries),
                    "avg_acc_mean": float(np.mean(accs)) if accs else None,
                    "avg_acc_std": float(np.std(accs)) if accs else None,
                    "fairness_mean": _mean([s["finetune"][str(e)]["fairness"] for s in summaries]),
                    "comm_mib_eq13_paper": _mean([paper_eq13_mib(s) for s in summaries]),
                    "comm_mb_eq13": _mean([s["comm_mb_eq13"] for s in summaries]),
                    "comm_mb_payload": _mean([s["comm_mb_payload"] for s in summaries]),
                    "sparsity": _mean([s["sparsity"] for s in summaries]),
                    "paper_avg_acc": _float(p.get("avg_acc")),
                    "paper_fairness": _float(p.get("fairness")),
                    "paper_comm_mb": _float(p.get("comm_mb")),
                }
                table.append(entry)
    return table


def paper_eq13_mib(summary: dict) -> float:
    """Eq. 13 as the paper counts it: the model transfers of the R training rounds (download
    and upload, 4 bytes per non-zero parameter), in MiB (bytes / 1024²); our ``comm_mb_eq13``
    also counts the clustering step and CA-AFP's score statistics, in 10^6 bytes."""
    if "comm_mib_eq13_by_kind" in summary:
        return summary["comm_mib_eq13_by_kind"]["models"]
    by_kind = summary.get("comm_mb_eq13_by_kind", {"models": summary["comm_mb_eq13"]})
    return by_kind["models"] * 1e6 / 1024**2  # runs written before the MiB figures


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _float(text: str | None) -> float | None:
    return float(text) if text not in (None, "") else None


def write_csv(table: list[dict], path: Path) -> None:
    with atomic_file(path, text=True) as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in table)


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.2f} %"


def _mb(v: float | None) -> str:
    return "—" if v is None else f"{v:.0f}"


def write_markdown(
    table: list[dict],
    path: Path,
    seeds: list[int],
    quick: bool,
    files: list[tuple[str, str]],
    wall_s: float,
    runs_wall_s: float,
    split: str = "time-ordered",
) -> None:
    lines = [
        "# Table 2 of the CA-AFP paper, reproduced",
        "",
        f"Split: **{split}**"
        + (
            " (the first 80 % of each client's windows per class train, the last 20 % test)"
            if split == "time-ordered"
            else " (random per-class split: overlapping windows leak into the test set)"
        )
        + ".",
        "",
        f"Seeds: {', '.join(map(str, seeds))}"
        + (" (**--quick: one seed only**)" if quick else "")
        + f". Training time: {runs_wall_s / 60:.1f} min summed over the runs' own wall times "
        f"({wall_s / 60:.1f} min in this invocation, which skips finished runs).",
        "",
        "| method | dataset | FT | seeds | avg acc (ours) | paper | fairness (ours) | paper "
        "| comm Eq. 13 as the paper (MiB) | paper (MB) | all transfers, MB | payload MB "
        "| sparsity |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        acc = _pct(r["avg_acc_mean"])
        if r["avg_acc_std"] is not None and r["seeds"] > 1:
            acc += f" ± {100 * r['avg_acc_std']:.2f}"
        lines.append(
            f"| {r['method']} | {r['dataset']} | {r['ft_epochs']} | {r['seeds']} | {acc} "
            f"| {_pct(r['paper_avg_acc'])} | {_pct(r['fairness_mean'])} "
            f"| {_pct(r['paper_fairness'])} | {_mb(r['comm_mib_eq13_paper'])} "
            f"| {_mb(r['paper_comm_mb'])} | {_mb(r['comm_mb_eq13'])} "
            f"| {_mb(r['comm_mb_payload'])} | {_pct(r['sparsity'])} |"
        )
    if MISSING:
        lines += ["", "Missing rows:"] + [f"* {k}: {v}" for k, v in MISSING.items()]
    lines += ["", "Data files used:"] + [f"* `{p}` sha256 `{h}`" for p, h in files]
    lines += [
        "",
        'Communication: "Eq. 13 as the paper" counts what Eq. 13 sums, the model downloads '
        "and uploads of the training rounds at 4 bytes per non-zero parameter, in the paper's "
        'unit (bytes / 1024², the paper\'s "MB"). "All transfers" adds the clustering '
        "step (download and upload, every client) and CA-AFP's score statistics, in 10^6 "
        "bytes; the payload is the encoded size (bitmask + values). docs/caafp.md compares "
        "them with the paper per kind.",
    ]
    write_text(path, "\n".join(lines) + "\n")


def read_csv(path: Path) -> list[dict]:
    """The rows of a ``table2*.csv`` written by :func:`write_csv` (numbers as floats)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return [
        {k: (v if k in ("method", "dataset") else _float(v)) for k, v in r.items()} for r in rows
    ]


def write_leak(ordered: list[dict], leaking: list[dict], path: Path) -> None:
    """Per cell, the random split's accuracy and fairness minus the time-ordered split's:
    the measured size of the leak of overlapping windows."""
    by_cell = {(r["method"], r["dataset"], r["ft_epochs"]): r for r in leaking}
    lines = [
        "# Table 2: the leak of the random split, per cell",
        "",
        "Random split minus time-ordered split (same methods, seeds and settings otherwise), in "
        "percentage points; positive accuracy = the random split looks better.",
        "",
        "| method | dataset | FT | seeds (time-ordered / random) | acc time-ordered | acc "
        "random | leak (pp) | fairness time-ordered | fairness random |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in ordered:
        other = by_cell.get((r["method"], r["dataset"], r["ft_epochs"]))
        if other is None or r["avg_acc_mean"] is None or other["avg_acc_mean"] is None:
            continue
        leak = 100 * (other["avg_acc_mean"] - r["avg_acc_mean"])
        lines.append(
            f"| {r['method']} | {r['dataset']} | {int(r['ft_epochs'])} "
            f"| {int(r['seeds'])} / {int(other['seeds'])} | {_pct(r['avg_acc_mean'])} "
            f"| {_pct(other['avg_acc_mean'])} | {leak:+.2f} | {_pct(r['fairness_mean'])} "
            f"| {_pct(other['fairness_mean'])} |"
        )
    write_text(path, "\n".join(lines) + "\n")


def plot(table: list[dict], path: Path) -> None:
    """Accuracy (FT 25) against communication, ours filled, the paper's hollow."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(DATASETS), figsize=(11, 4.2))
    methods = sorted({r["method"] for r in table})
    colors = dict(zip(methods, plt.cm.tab10.colors))
    for ax, dataset in zip(axes, DATASETS):
        for r in table:
            if r["dataset"] != dataset or r["ft_epochs"] != max(FT_EPOCHS):
                continue
            c = colors[r["method"]]
            if r["avg_acc_mean"] is not None:
                x = r["comm_mib_eq13_paper"]
                ax.scatter(x, 100 * r["avg_acc_mean"], color=c, label=r["method"])
            if r["paper_avg_acc"] is not None:
                ax.scatter(
                    r["paper_comm_mb"],
                    100 * r["paper_avg_acc"],
                    facecolors="none",
                    edgecolors=c,
                    label=f"{r['method']} (paper)",
                )
        ax.set_title(f"{dataset}, fine-tuning {max(FT_EPOCHS)} epochs")
        ax.set_xlabel("communication, Eq. 13 (MiB, the paper's MB)")
        ax.set_ylabel("average client accuracy, %")
        ax.grid(alpha=0.3)
    axes[-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    write_figure(path, fig, dpi=120)
    plt.close(fig)


def reproduce(
    out: str | Path = "results",
    quick: bool = False,
    seeds: int = 5,
    data_dir: str | None = None,
    jobs: int | str = 1,
    split: str = "time-ordered",
) -> Path:
    """Train what is missing, then write table2.csv, table2.md and table2.png under ``out``
    (``table2_random.*`` for ``split="random"``)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    seed_list = [0] if quick else list(range(seeds))
    if quick:
        print("QUICK reproduction: one seed (0) per row; the paper averages five.", file=sys.stderr)
    files = study.data_files(DATASETS, data_dir)  # fetches what is missing, else one line
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    wall = run_all(out, seed_list, data_dir, jobs=jobs, split=split)
    table = aggregate(out, seed_list, split=split)
    name = "table2" + SPLIT_SUFFIX[split]
    write_csv(table, out / f"{name}.csv")
    total = sum(
        open_finished(run_dir(out, r, d, s, split)).summary["wall_s"]
        for r in ROWS
        for d in DATASETS
        for s in seed_list
    )
    write_markdown(table, out / f"{name}.md", seed_list, quick, files, wall, total, split)
    plot(table, out / f"{name}.png")
    if (out / "table2.csv").exists() and (out / "table2_random.csv").exists():
        write_leak(read_csv(out / "table2.csv"), read_csv(out / "table2_random.csv"), out / LEAK)
    return out / f"{name}.md"
