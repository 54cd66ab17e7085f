"""``fedprune reproduce noniid``: the non-IID robustness study of the CA-AFP paper (Figure 4,
Table 10) on real WISDM.

Table 10: every client keeps at most k of its classes (``--classes-per-client k``; Extreme
k = 1, Moderate k = 2, Mild k = 3; "Allowed classes are randomly sampled from each client's
ground-truth labels, and data from other classes are discarded"), 50 rounds, 70 % target
sparsity, five seeds, mean ± std. The methods are Table 9's six (CA-AFP, Global-FT, FedSNIP,
EfficientFL, FedCHAR, ClusterFL) with Table 2's arguments. Interpretation: Table 10 names no
fine-tuning, so accuracy is without it (``--ft-epochs 0``). The
paper's numbers where its text has them are in ``paper_values/noniid_paper.csv``.
``--quick``: seed 0 only.
"""

from __future__ import annotations

from pathlib import Path

from fedprune.reproduce.finetune import COMPARED, DENSE_CLUSTERED, PRUNED_BASELINES
from fedprune.reproduce.study import (
    Claim,
    Labels,
    Point,
    Study,
    accuracy_section,
    figure,
    grouped_bars,
    near_paper,
    row_of,
    value_of,
)

LEVELS = (1, 2, 3)
LEVEL_NAMES = {1: "extreme", 2: "moderate", 3: "mild"}


def points(quick: bool) -> list[Point]:
    return [
        Point(
            (("k", str(k)), ("method", name)),
            method,
            ("--dataset", "wisdm", *args, "--classes-per-client", str(k), "--ft-epochs", "0"),
        )
        for k in LEVELS
        for name, (method, args) in COMPARED.items()
    ]


def measure(summary: dict) -> list[tuple[Labels, dict]]:
    result = summary["finetune"]["0"]
    return [((), {"acc": result["avg_acc"], "fairness": result["fairness"]})]


def _acc(table: list[dict], method: str, k: int) -> float | None:
    return value_of(table, method=method, k=k)


def _lead(table: list[dict], k: int) -> float | None:
    ours = _acc(table, "caafp", k)
    pruned = [_acc(table, m, k) for m in PRUNED_BASELINES]
    if ours is None or None in pruned:
        return None
    return ours - max(pruned)


def claims(table: list[dict]) -> list[Claim]:
    found = []
    leads = {k: _lead(table, k) for k in LEVELS}
    if all(v is not None for v in leads.values()):
        found.append(
            Claim(
                "CA-AFP's lead over the best pruned baseline grows as k falls",
                leads[1] > leads[2] > leads[3],
                ", ".join(f"k={k}: {100 * v:+.1f} pp" for k, v in leads.items()),
            )
        )
    for k in (1, 2):
        pruned = [_acc(table, m, k) for m in PRUNED_BASELINES]
        others = [_acc(table, m, k) for m in (*DENSE_CLUSTERED, "caafp")]
        if None not in pruned and None not in others:
            found.append(
                Claim(
                    f"{LEVEL_NAMES[k]} non-IID (k={k}): the pruned baselines are below the "
                    "clustered dense methods and CA-AFP",
                    max(pruned) < min(others),
                    f"pruned {', '.join(f'{100 * a:.1f}' for a in pruned)} %, others "
                    f"{', '.join(f'{100 * a:.1f}' for a in others)} %",
                )
            )
    for method, paper in (("caafp", 0.80), *((m, 0.50) for m in PRUNED_BASELINES)):
        ours = _acc(table, method, 1)
        if ours is not None:
            found.append(near_paper(f"k=1: {method}", ours, paper, 0.05))
    return found


def body(table: list[dict]) -> list[str]:
    return accuracy_section("Accuracy per non-IID level (no fine-tuning)", table, ("k", "method"))


def plot(table: list[dict], path: Path) -> None:
    series = []
    for method in COMPARED:
        rows = [row_of(table, method=method, k=k) for k in LEVELS]
        values = [None if r is None else 100 * r["acc"] for r in rows]
        errors = [0.0 if r is None else 100 * (r.get("acc_std") or 0.0) for r in rows]
        series.append((method, values, errors))
    with figure(path, figsize=(8, 4.5)) as (_, ax):
        grouped_bars(ax, [f"k={k} ({LEVEL_NAMES[k]})" for k in LEVELS], series)
        ax.set_ylabel("average accuracy (%), mean ± std over seeds")
        ax.set_title("WISDM: accuracy per non-IID level")


STUDY = Study(
    name="noniid",
    title="Non-IID robustness on WISDM (Figure 4, Table 10), reproduced",
    datasets=("wisdm",),
    default_seeds=5,
    points=points,
    measure=measure,
    paper_columns={"acc": "acc"},
    claims=claims,
    plot=plot,
    body=body,
)
