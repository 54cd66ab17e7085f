"""``fedprune reproduce table2``: Table 2 of the CA-AFP paper on the real data.

A :class:`~fedprune.reproduce.study.Study` per split: every (method, dataset, seed) is an
ordinary run directory ``<row>-<dataset>-s<seed>`` under ``<out>/runs/`` (time-ordered split,
the default) or ``<out>/runs-random/`` (``--split random``: the leaking split of older
fedprune versions, kept to measure the leak), trained by a ``fedprune train`` subprocess; a
finished run is never recomputed and an interrupted one resumes from its last round, so the
whole reproduction resumes after an interruption. Other studies fine-tune or measure the
same run directories (:data:`ROWS`, :func:`row_arguments`). The table aggregates the runs
over seeds, one line per (method, dataset, fine-tuning epochs), next to the paper's values
(``paper_values/table2_paper.csv``), and a plot shows accuracy against communication. Once
both splits' tables exist, ``table2_leak.md`` gives their difference per cell.
"""

from __future__ import annotations

import csv
import dataclasses
from functools import cache, partial
from pathlib import Path

from fedprune.reproduce import study as S
from fedprune.runs.files import write_text

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


SPLITS = ("time-ordered", "random")
SPLIT_DIRS = {"time-ordered": "runs", "random": "runs-random"}
SPLIT_SUFFIX = {"time-ordered": "", "random": "_random"}  # of table2{suffix}.md/.csv/.png
LEAK = "table2_leak.md"  # written once both splits' tables exist


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


def point(row: Row, dataset: str, split: str = "time-ordered") -> S.Point:
    """The study's point of ``row`` on ``dataset``: its run directories are named
    ``<row>-<dataset>-s<seed>``, as other studies that share them expect (the split is a
    label too, so that progress lines name it)."""
    return S.Point(
        (("method", row.name), ("dataset", dataset), ("split", split)),
        row.method,
        row_arguments(row, dataset, split),
        name=f"{row.name}-{dataset}",
    )


def run_dir(out: Path, row: Row, dataset: str, seed: int, split: str = "time-ordered") -> Path:
    return S.run_dir(Path(out), study(split), point(row, dataset, split), seed)


def train_command(
    row: Row,
    dataset: str,
    seed: int,
    out: Path,
    data_dir: str | None,
    split: str = "time-ordered",
) -> list[str]:
    """The ``fedprune train`` command the study trains one run with."""
    _, (job,) = S.jobs(study(split), [point(row, dataset, split)], [seed], Path(out), data_dir)
    return list(job.command)


def paper_values() -> list[dict]:
    """The paper's Table 2 (``paper_values/table2_paper.csv``), one dict per cell."""
    return S.read_paper(study().paper_csv)


def paper_eq13_mib(summary: dict) -> float:
    """Eq. 13 as the paper counts it: the model transfers of the R training rounds (download
    and upload, 4 bytes per non-zero parameter), in MiB (bytes / 1024²); our ``comm_mb_eq13``
    also counts the clustering step and CA-AFP's score statistics, in 10^6 bytes."""
    if "comm_mib_eq13_by_kind" in summary:
        return summary["comm_mib_eq13_by_kind"]["models"]
    by_kind = summary.get("comm_mb_eq13_by_kind", {"models": summary["comm_mb_eq13"]})
    return by_kind["models"] * 1e6 / 1024**2  # runs written before the MiB figures


def measure(summary: dict) -> list[tuple[S.Labels, dict]]:
    """One row per fine-tuning length; the communication and sparsity are the run's."""
    run = {
        "comm_mib_eq13_paper": paper_eq13_mib(summary),
        "comm_mb_eq13": summary["comm_mb_eq13"],
        "comm_mb_payload": summary["comm_mb_payload"],
        "sparsity": summary["sparsity"],
    }
    return [
        (
            (("ft_epochs", str(e)),),
            {
                "avg_acc": summary["finetune"][str(e)]["avg_acc"],
                "fairness": summary["finetune"][str(e)]["fairness"],
                **run,
            },
        )
        for e in FT_EPOCHS
    ]


def publish(row: dict) -> dict:
    """The :data:`COLUMNS` of a row of means: ``_mean`` names, the population std of the
    accuracy (0 for one seed) and the paper's values."""
    std = row["avg_acc_std"]
    return {
        "method": row["method"],
        "dataset": row["dataset"],
        "ft_epochs": row["ft_epochs"],
        "seeds": row["seeds"],
        "avg_acc_mean": row["avg_acc"],
        "avg_acc_std": 0.0 if std is None and row["avg_acc"] is not None else std,
        "fairness_mean": row["fairness"],
        "comm_mib_eq13_paper": row["comm_mib_eq13_paper"],
        "comm_mb_eq13": row["comm_mb_eq13"],
        "comm_mb_payload": row["comm_mb_payload"],
        "sparsity": row["sparsity"],
        "paper_avg_acc": row["paper_avg_acc"],
        "paper_fairness": row["paper_fairness"],
        "paper_comm_mb": row["paper_comm_mib_eq13_paper"],
    }


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.2f} %"


def _mb(v: float | None) -> str:
    return "—" if v is None else f"{v:.0f}"


def body(table: list[dict]) -> list[str]:
    lines = [
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
    return lines


COMMUNICATION = (
    'Communication: "Eq. 13 as the paper" counts what Eq. 13 sums, the model downloads '
    "and uploads of the training rounds at 4 bytes per non-zero parameter, in the paper's "
    'unit (bytes / 1024², the paper\'s "MB"). "All transfers" adds the clustering '
    "step (download and upload, every client) and CA-AFP's score statistics, in 10^6 "
    "bytes; the payload is the encoded size (bitmask + values). docs/caafp.md compares "
    "them with the paper per kind."
)


def page(report: S.Report, split: str) -> list[str]:
    """Table 2's page: the split, the seeds and training time, the table, the data files and
    how communication is counted."""
    return [
        f"# {report.study.title}",
        "",
        f"Split: **{split}**"
        + (
            " (the first 80 % of each client's windows per class train, the last 20 % test)"
            if split == "time-ordered"
            else " (random per-class split: overlapping windows leak into the test set)"
        )
        + ".",
        "",
        f"Seeds: {', '.join(map(str, report.seeds))}"
        + (" (**--quick: one seed only**)" if report.quick else "")
        + f". Training time: {report.runs_wall_s / 60:.1f} min summed over the runs' own wall "
        f"times ({report.wall_s / 60:.1f} min in this invocation, which skips finished runs).",
        "",
        *body(report.table),
        "",
        "Data files used:",
        *[f"* `{p}` sha256 `{h}`" for p, h in report.files],
        "",
        COMMUNICATION,
    ]


def plot(table: list[dict], path: Path) -> None:
    """Accuracy (FT 25) against communication, ours filled, the paper's hollow."""
    with S.figure(path, len(DATASETS), figsize=(11, 4.2)) as (_, axes):
        import matplotlib.pyplot as plt

        methods = sorted({r["method"] for r in table})
        colors = dict(zip(methods, plt.cm.tab10.colors))
        for ax, dataset in zip(axes, DATASETS):
            for r in table:
                if r["dataset"] != dataset or r["ft_epochs"] != str(max(FT_EPOCHS)):
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


def read_csv(path: Path) -> list[dict]:
    """The rows of a ``table2*.csv`` (numbers as floats, empty cells as None)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return [
        {k: (v if k in ("method", "dataset") else _float(v)) for k, v in r.items()} for r in rows
    ]


def _float(text: str) -> float | None:
    return float(text) if text else None


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


def leak_once_both_exist(report: S.Report) -> None:
    """``table2_leak.md`` from ``table2.csv`` and ``table2_random.csv`` where both exist."""
    ordered, leaking = (report.out / f"table2{SPLIT_SUFFIX[s]}.csv" for s in SPLITS)
    if ordered.exists() and leaking.exists():
        write_leak(read_csv(ordered), read_csv(leaking), report.out / LEAK)


@cache
def study(split: str = "time-ordered") -> S.Study:
    """Table 2 on the ``split``: its runs in ``<out>/runs`` (``runs-random``), its files
    ``table2.*`` (``table2_random.*``), with or without ``--quick``."""
    return S.Study(
        name="table2",
        title="Table 2 of the CA-AFP paper, reproduced",
        datasets=DATASETS,
        default_seeds=5,
        points=lambda quick: [point(r, d, split) for d in DATASETS for r in ROWS],
        measure=measure,
        paper_columns={
            "avg_acc": "avg_acc",
            "fairness": "fairness",
            "comm_mib_eq13_paper": "comm_mb",
            "sparsity": "sparsity",
        },
        claims=lambda table: [],
        plot=plot,
        body=body,
        runs=SPLIT_DIRS[split],
        files="table2" + SPLIT_SUFFIX[split],
        quick_files=False,
        publish=publish,
        columns=COLUMNS,
        page=partial(page, split=split),
        more_files=leak_once_both_exist,
    )


def reproduce(
    out: str | Path = "results",
    quick: bool = False,
    seeds: int = 5,
    data_dir: str | None = None,
    jobs: int | str = 1,
    split: str = "time-ordered",
) -> Path:
    """Train what is missing, then write table2.csv, table2.md and table2.png under ``out``
    (``table2_random.*`` for ``split="random"``; ``table2_leak.md`` once both exist)."""
    return S.reproduce(study(split), out, quick, seeds, data_dir, jobs)
