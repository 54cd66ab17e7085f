"""``fedprune reproduce fedcref``: the FedCRef paper's Tables 5-6 and Figure 8 on real data.

Rows: dirtiness 0, 0.3 and 0.5 on MNIST (stand-in for EMNIST-digits, which is not available
here; MNIST has ~6,000 images per class instead of ~28,000), Fashion-MNIST (theta = 0.15 and
30 epochs, as the paper does for it) and KMNIST (only its 10,000-image test split exists
here, so S = 100 images per class and client instead of 500). Every (dataset, dirtiness,
seed) is an ordinary ``fedprune train fedcref`` run directory under ``<out>/runs/``,
resumable, run by :mod:`fedprune.reproduce.runner`. Outputs: ``fedcref_table.md``,
``fedcref_table.csv`` (means and 95 % CIs over seeds next to the paper's means and CIs in
``paper_values/fedcref_paper.csv``, :mod:`fedprune.reproduce.intervals`) and
``fedcref_iterations.png`` (per-iteration curves like the paper's Figure 8).
"""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import numpy as np

from fedprune.reproduce import runner
from fedprune.reproduce.intervals import against, mean_ci
from fedprune.runs import names
from fedprune.runs.files import atomic_file, write_figure, write_text
from fedprune.runs.finished import finished_summary
from fedprune.runs.run_dir import read_metrics

PAPER_VALUES = Path(__file__).resolve().parent / "paper_values" / "fedcref_paper.csv"
DIRTINESS = (0.0, 0.3, 0.5)
COMPARED = ("acc_final", "communities", "wrong_assoc_pct")  # with the paper's 95 % CI
COLUMNS = (
    "dataset", "dirtiness", "seeds", "acc_init", "acc_final", "acc_final_std", "acc_final_ci",
    "communities", "communities_ci", "true_categories", "wrong_assoc_pct", "wrong_assoc_pct_ci",
    "clusters_total", "isolated_start", "isolated_end", "iterations", "wall_s",
    "paper_acc_final", "paper_acc_final_ci", "acc_final_vs_paper",
    "paper_communities", "paper_communities_ci", "communities_vs_paper",
    "paper_wrong_assoc_pct", "paper_wrong_assoc_pct_ci", "wrong_assoc_pct_vs_paper",
    "paper_isolated_start", "paper_isolated_end",
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Setting:
    """A dataset of the reproduction and the ``fedprune train fedcref`` options it needs."""

    dataset: str
    args: tuple[str, ...] = ()


SETTINGS = (
    Setting("mnist"),
    Setting("fashion_mnist", ("--theta", "0.15", "--epochs", "30")),
    Setting("kmnist", ("--split", "test", "--samples-per-class", "100")),
)


def run_dir(out: Path, setting: Setting, dirtiness: float, seed: int) -> Path:
    return out / "runs" / f"fedcref-{setting.dataset}-d{dirtiness}-s{seed}"


def jobs(out: Path, seeds: list[int], data_dir: str | None) -> list[runner.Job]:
    todo = []
    for seed in seeds:
        for setting in SETTINGS:
            for d in DIRTINESS:
                target = run_dir(out, setting, d, seed)
                args = ["--dataset", setting.dataset, "--dirtiness", str(d), "--seed", str(seed)]
                args += [*setting.args, *(["--data-dir", data_dir] if data_dir else [])]
                command = runner.train_command("fedcref", target, *args)
                todo.append(
                    runner.Job(f"fedcref {setting.dataset} d={d} seed {seed}", command, target)
                )
    return todo


def aggregate(out: Path, seeds: list[int]) -> list[dict]:
    """One row per (dataset, dirtiness) over the finished seeds, with the paper's values: the
    means, ACC's population std, and for :data:`COMPARED` our 95 % CI half-width (``_ci``,
    ``None`` for one seed), the paper's (``paper_..._ci``) and where our mean falls against
    the paper's interval (``_vs_paper``, :func:`fedprune.reproduce.intervals.against`)."""
    with open(PAPER_VALUES, newline="") as f:
        paper = {(r["dataset"], float(r["dirtiness"])): r for r in csv.DictReader(f)}
    table = []
    for setting in SETTINGS:
        for d in DIRTINESS:
            found = (finished_summary(run_dir(out, setting, d, s)) for s in seeds)
            summaries = [summary for summary in found if summary is not None]
            p = paper.get((setting.dataset, d), {})
            row = {"dataset": setting.dataset, "dirtiness": d, "seeds": len(summaries)}
            for key in (
                "acc_init", "acc_final", "communities", "true_categories", "wrong_assoc_pct",
                "clusters_total", "isolated_start", "isolated_end", "iterations", "wall_s",
            ):  # fmt: skip
                values = [s[key] for s in summaries]
                row[key] = float(np.mean(values)) if values else None
            accs = [s["acc_final"] for s in summaries]
            row["acc_final_std"] = float(np.std(accs)) if accs else None
            for key in ("acc_final", "communities", "wrong_assoc_pct", "isolated_start"):
                row[f"paper_{key}"] = float(p[key]) if p else None
            row["paper_isolated_end"] = float(p["isolated_end"]) if p else None
            row["paper_dataset"] = p.get("paper_dataset", "")
            for key in COMPARED:
                values = [s[key] for s in summaries]
                row[f"{key}_ci"] = mean_ci(values)[1] if values else None
                row[f"paper_{key}_ci"] = float(p[f"{key}_ci"]) if p else None
                row[f"{key}_vs_paper"] = (
                    against(row[key], row[f"{key}_ci"], row[f"paper_{key}"], row[f"paper_{key}_ci"])
                    if values and p
                    else None
                )
            table.append(row)
    return table


def _f(v: float | None, fmt: str) -> str:
    return "—" if v is None else format(v, fmt)


def _pm(mean: float | None, half_width: float | None, fmt: str) -> str:
    """``mean ± half_width`` (the mean alone without an interval)."""
    text = _f(mean, fmt)
    return text if half_width is None else f"{text} ± {format(half_width, fmt)}"


def _compared(row: dict, key: str, fmt: str) -> str:
    """Our mean ± CI, the paper's mean ± CI in brackets, and where ours falls."""
    ours = _pm(row[key], row[f"{key}_ci"], fmt)
    paper = _pm(row[f"paper_{key}"], row[f"paper_{key}_ci"], fmt)
    verdict = row[f"{key}_vs_paper"]
    return f"{ours} ({paper}){'' if verdict is None else f' {verdict}'}"


def write_markdown(table: list[dict], path: Path, seeds: list[int], quick: bool) -> None:
    lines = [
        "# FedCRef: Tables 5-6 of the paper on real data",
        "",
        f"Seeds: {', '.join(map(str, seeds))}{' (--quick: one seed)' if quick else ''}. "
        "Ours: mean ± 95 % CI (Student's t) over the seeds; in brackets the paper's mean ± "
        "95 % CI over five runs; then where our mean falls: in the paper's interval, outside "
        "it but with overlapping intervals, above or below. MNIST stands in for "
        "EMNIST-digits, KMNIST uses its test split with S = 100. Isolated clusters: ours after "
        "the first association; the paper's start values equal its total number of clusters "
        "(25 clients x 3.5), i.e. it counts them before any association (our total in "
        "brackets).",
        "",
        "| dataset (paper's) | dirtiness | runs | ACC init | ACC end (paper) | communities "
        "found (paper) / true | wrong assoc. % (paper) | isolated start -> end (paper) | "
        "iterations | wall s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in table:
        lines.append(
            f"| {r['dataset']} ({r['paper_dataset']}) | {r['dirtiness']} | {r['seeds']} | "
            f"{_f(r['acc_init'], '.3f')} | {_compared(r, 'acc_final', '.3f')} | "
            f"{_compared(r, 'communities', '.1f')} / {_f(r['true_categories'], '.0f')} | "
            f"{_compared(r, 'wrong_assoc_pct', '.1f')} | "
            f"{_f(r['isolated_start'], '.1f')} [{_f(r['clusters_total'], '.1f')}] -> "
            f"{_f(r['isolated_end'], '.1f')} ({_f(r['paper_isolated_start'], '.1f')} -> "
            f"{_f(r['paper_isolated_end'], '.1f')}) | {_f(r['iterations'], '.1f')} | "
            f"{_f(r['wall_s'], '.0f')} |"
        )
    write_text(path, "\n".join(lines) + "\n")


def write_csv(table: list[dict], path: Path) -> None:
    with atomic_file(path, text=True) as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(table)


PANELS = (
    ("communities", "communities |G|"),
    ("acc", "mean client ACC"),
    ("wrong_assoc_pct", "wrong associations (%)"),
    ("isolated", "isolated clusters |I|"),
    ("active_clients", "active clients |A|"),
)


def iteration_series(run: Path) -> dict[str, tuple[list[int], list[float]]]:
    """Each plotted quantity per iteration of one run; ACC starts at iteration 0 with the
    initial clustering's ACC (``acc_init`` of ``summary.json``) once the run has finished."""
    rows = read_metrics(run / names.METRICS)
    iterations = [int(r["iteration"]) for r in rows]
    series = {key: (list(iterations), [float(r[key]) for r in rows]) for key, _ in PANELS}
    summary = finished_summary(run)
    if summary is not None:
        its, values = series["acc"]
        series["acc"] = ([0, *its], [float(summary["acc_init"]), *values])
    return series


def plot_iterations(out: Path, seeds: list[int], path: Path) -> None:
    """Figure 8-like panels: communities, ACC, wrong associations, isolated clusters and
    active clients per iteration, one line per (dataset, dirtiness), first seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(PANELS), figsize=(4 * len(PANELS), 3.4))
    for setting in SETTINGS:
        for d in DIRTINESS:
            run = run_dir(out, setting, d, seeds[0])
            if not (run / names.METRICS).exists():
                continue
            series = iteration_series(run)
            for ax, (key, _) in zip(axes, PANELS):
                ax.plot(*series[key], marker="o", ms=3, label=f"{setting.dataset} d={d}")
    for ax, (_, title) in zip(axes, PANELS):
        ax.set_title(title)
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    write_figure(path, fig, dpi=120)
    plt.close(fig)


def reproduce(
    out: str = "results",
    quick: bool = False,
    seeds: int = 5,
    data_dir: str | None = None,
    parallel: int | str = 1,
) -> str:
    """Train what is missing, then write the table and the plot; returns the markdown."""
    out_path = Path(out)
    seed_list = [0] if quick else list(range(seeds))
    wall = runner.run_jobs(jobs(out_path, seed_list, data_dir), parallel)
    table = aggregate(out_path, seed_list)
    out_path.mkdir(parents=True, exist_ok=True)
    write_csv(table, out_path / "fedcref_table.csv")
    write_markdown(table, out_path / "fedcref_table.md", seed_list, quick)
    plot_iterations(out_path, seed_list, out_path / "fedcref_iterations.png")
    text = (out_path / "fedcref_table.md").read_text()
    return text + f"\nwall time of this invocation: {wall:.0f} s\n"
