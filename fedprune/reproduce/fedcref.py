"""``fedprune reproduce fedcref``: the FedCRef paper's Tables 5-6 and Figure 8 on real data.

Rows: dirtiness 0, 0.3 and 0.5 on MNIST (stand-in for EMNIST-digits, which is not available
here; MNIST has ~6,000 images per class instead of ~28,000), Fashion-MNIST (theta = 0.15 and
30 epochs, as the paper does for it) and KMNIST (only its 10,000-image test split exists
here, so S = 100 images per class and client instead of 500). A
:class:`~fedprune.reproduce.study.Study`: every (dataset, dirtiness, seed) is an ordinary
``fedprune train fedcref`` run directory ``fedcref-<dataset>-d<dirtiness>-s<seed>`` under
``<out>/runs/``, resumable, run by :mod:`fedprune.reproduce.runner`. Outputs:
``fedcref_table.md``, ``fedcref_table.csv`` (means and 95 % CIs over seeds next to the
paper's means and CIs in ``paper_values/fedcref_paper.csv``,
:mod:`fedprune.reproduce.intervals`) and ``fedcref_iterations.png`` (per-iteration curves
like the paper's Figure 8), with or without ``--quick``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fedprune.reproduce import study as S
from fedprune.reproduce.intervals import against
from fedprune.runs import names
from fedprune.runs.finished import finished_summary
from fedprune.runs.run_dir import read_metrics

DIRTINESS = (0.0, 0.3, 0.5)
COMPARED = ("acc_final", "communities", "wrong_assoc_pct")  # with the paper's 95 % CI
MEASURED = (
    "acc_init", "acc_final", "communities", "true_categories", "wrong_assoc_pct",
    "clusters_total", "isolated_start", "isolated_end", "iterations",
)  # fmt: skip
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


def points(quick: bool) -> list[S.Point]:
    """Every setting at every dirtiness (the same with ``quick``: only the seeds differ)."""
    return [
        S.Point(
            (("dataset", s.dataset), ("dirtiness", str(d))),
            "fedcref",
            ("--dataset", s.dataset, "--dirtiness", str(d), *s.args),
            name=f"fedcref-{s.dataset}-d{d}",
        )
        for s in SETTINGS
        for d in DIRTINESS
    ]


def measure(summary: dict) -> list[tuple[S.Labels, dict]]:
    """The run's summary numbers; its wall time as ``run_wall_s`` (the table shows the mean
    over seeds, the study's ``wall_s`` is their sum)."""
    return [((), {**{k: summary[k] for k in MEASURED}, "run_wall_s": summary["wall_s"]})]


def publish(row: dict) -> dict:
    """A row of means with the paper's values: the mean wall time, ACC's population std (0
    for one seed), and for :data:`COMPARED` where our mean falls against the paper's 95 %
    interval (``_vs_paper``, :func:`fedprune.reproduce.intervals.against`)."""
    row = {**row, "wall_s": row["run_wall_s"]}
    if row["acc_final_std"] is None and row["acc_final"] is not None:
        row["acc_final_std"] = 0.0
    for key in COMPARED:
        paper = row[f"paper_{key}"], row[f"paper_{key}_ci"]
        row[f"{key}_vs_paper"] = (
            against(row[key], row[f"{key}_ci"], *paper)
            if row[key] is not None and None not in paper
            else None
        )
    return row


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


def body(table: list[dict]) -> list[str]:
    lines = [
        "| dataset (paper's) | dirtiness | runs | ACC init | ACC end (paper) | communities "
        "found (paper) / true | wrong assoc. % (paper) | isolated start -> end (paper) | "
        "iterations | wall s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in table:
        lines.append(
            f"| {r['dataset']} ({r['paper_dataset'] or ''}) | {r['dirtiness']} | {r['seeds']} | "
            f"{_f(r['acc_init'], '.3f')} | {_compared(r, 'acc_final', '.3f')} | "
            f"{_compared(r, 'communities', '.1f')} / {_f(r['true_categories'], '.0f')} | "
            f"{_compared(r, 'wrong_assoc_pct', '.1f')} | "
            f"{_f(r['isolated_start'], '.1f')} [{_f(r['clusters_total'], '.1f')}] -> "
            f"{_f(r['isolated_end'], '.1f')} ({_f(r['paper_isolated_start'], '.1f')} -> "
            f"{_f(r['paper_isolated_end'], '.1f')}) | {_f(r['iterations'], '.1f')} | "
            f"{_f(r['wall_s'], '.0f')} |"
        )
    return lines


def page(report: S.Report) -> list[str]:
    """The title, how to read the table (seeds, intervals, the stand-in datasets), the table."""
    return [
        f"# {report.study.title}",
        "",
        f"Seeds: {', '.join(map(str, report.seeds))}"
        f"{' (--quick: one seed)' if report.quick else ''}. "
        "Ours: mean ± 95 % CI (Student's t) over the seeds; in brackets the paper's mean ± "
        "95 % CI over five runs; then where our mean falls: in the paper's interval, outside "
        "it but with overlapping intervals, above or below. MNIST stands in for "
        "EMNIST-digits, KMNIST uses its test split with S = 100. Isolated clusters: ours after "
        "the first association; the paper's start values equal its total number of clusters "
        "(25 clients x 3.5), i.e. it counts them before any association (our total in "
        "brackets).",
        "",
        *body(report.table),
    ]


PANELS = (
    ("communities", "communities |G|"),
    ("acc", "mean client ACC"),
    ("wrong_assoc_pct", "wrong associations (%)"),
    ("isolated", "isolated clusters |I|"),
    ("active_clients", "active clients |A|"),
)
FIGURE = "fedcref_iterations.png"


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


def plot_iterations(report: S.Report) -> None:
    """Figure 8-like panels (``fedcref_iterations.png``): communities, ACC, wrong
    associations, isolated clusters and active clients per iteration, one line per
    (dataset, dirtiness), first seed."""
    with S.figure(report.out / FIGURE, len(PANELS), figsize=(4 * len(PANELS), 3.4)) as (_, axes):
        for p in report.points:
            run = report.run_dir(p, report.seeds[0])
            if not (run / names.METRICS).exists():
                continue
            series = iteration_series(run)
            label = f"{p.label('dataset')} d={p.label('dirtiness')}"
            for ax, (key, _) in zip(axes, PANELS):
                ax.plot(*series[key], marker="o", ms=3, label=label)
        for ax, (_, title) in zip(axes, PANELS):
            ax.set_title(title)
            ax.set_xlabel("iteration")
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=7)


STUDY = S.Study(
    name="fedcref",
    title="FedCRef: Tables 5-6 of the paper on real data",
    datasets=(),  # each run fetches its images; the table lists no data files
    default_seeds=5,
    points=points,
    measure=measure,
    # the paper's columns our rows also have are named here, so only the labels match rows;
    # ``dataset`` takes the paper's name of the dataset (text)
    paper_columns={
        "dataset": "paper_dataset",
        **{k: k for k in ("acc_init", "true_categories", "isolated_start", "isolated_end")},
        **{k: k for key in COMPARED for k in (key, f"{key}_ci")},
    },
    claims=lambda table: [],
    plot=None,
    body=body,
    files="fedcref_table",
    quick_files=False,
    intervals=COMPARED,
    publish=publish,
    columns=COLUMNS,
    page=page,
    more_files=plot_iterations,
)


def reproduce(
    out: str = "results",
    quick: bool = False,
    seeds: int = 5,
    data_dir: str | None = None,
    parallel: int | str = 1,
) -> str:
    """Train what is missing, then write the table and the plot; returns the markdown."""
    report = S.produce(STUDY, out, quick, seeds, data_dir, parallel)
    return report.markdown.read_text() + f"\nwall time of this invocation: {report.wall_s:.0f} s\n"
