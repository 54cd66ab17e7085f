"""``fedprune reproduce phases``: the phase-sensitivity study of the CA-AFP paper (Section
5.1.2, Figure 2, Table 7) on real WISDM.

Table 7: P3 = 40 pruning rounds, P4 = 3 fine-tuning epochs, three seeds; Study A varies the
start sparsity from 0.0 to 0.9 by 0.1 (P1 = P2 = 0); Study B varies P2 in {0, 5, ..., 20}
and Study C P1 in {0, 5, ..., 20}, both at start sparsity 0.5. The target stays 0.7, so a
start above it (0.8, 0.9) regrows to 0.7 by the last mask update. The point
(P1, P2, start) = (0, 0, 0.5) belongs to all three studies and is trained once.
Interpretations: accuracy is the fine-tuned (P4 = 3) average accuracy; communication is
Eq. 13 as the paper counts it (model transfers of the training rounds, bytes / 1024²; see
``table2.paper_eq13_mib``), the quantity Figure 2 plots against accuracy. The paper gives
Figure 2 only as a plot, so ``paper_values/phases_paper.csv`` holds the grid without values
and the docs compare the claims of §5.1.2. ``--quick``: one seed and the points
start {0.0, 0.3, 0.5, 0.7, 0.9}, P2 and P1 {0, 10, 20}.
"""

from __future__ import annotations

from pathlib import Path

from fedprune.reproduce.study import Claim, Labels, Point, Study, figure, markdown_table
from fedprune.reproduce.table2 import paper_eq13_mib

STARTS = tuple(round(0.1 * i, 1) for i in range(10))
ROUNDS = (0, 5, 10, 15, 20)
QUICK_STARTS = (0.0, 0.3, 0.5, 0.7, 0.9)
QUICK_ROUNDS = (0, 10, 20)
P3, FT, SHARED_START = 40, 3, 0.5


def _point(study: str, p1: int, p2: int, start: float) -> Point:
    return Point(
        (("study", study), ("p1", str(p1)), ("p2", str(p2)), ("start", f"{start:.1f}")),
        "caafp",
        (
            *("--dataset", "wisdm", "--phases", f"{p1},{p2},{P3}"),
            *("--start-sparsity", f"{start:.1f}", "--target-sparsity", "0.7"),
            *("--ft-epochs", str(FT)),
        ),
    )


def points(quick: bool) -> list[Point]:
    starts, rounds = (QUICK_STARTS, QUICK_ROUNDS) if quick else (STARTS, ROUNDS)
    return (
        [_point("A", 0, 0, s) for s in starts]
        + [_point("B", 0, r, SHARED_START) for r in rounds]
        + [_point("C", r, 0, SHARED_START) for r in rounds]
    )


def measure(summary: dict) -> list[tuple[Labels, dict]]:
    result = summary["finetune"][str(FT)]
    return [
        (
            (),
            {
                "acc": result["avg_acc"],
                "fairness": result["fairness"],
                "comm_mib": paper_eq13_mib(summary),
                "sparsity": summary["sparsity"],
            },
        )
    ]


def _study(table: list[dict], name: str, x: str) -> list[dict]:
    return sorted((r for r in table if r["study"] == name), key=lambda r: float(r[x]))


def _monotone(values: list[float], rising: bool) -> bool:
    pairs = list(zip(values, values[1:]))
    return all(b > a for a, b in pairs) if rising else all(b < a for a, b in pairs)


def claims(table: list[dict]) -> list[Claim]:
    a = _study(table, "A", "start")
    b, c = _study(table, "B", "p2"), _study(table, "C", "p1")
    found = []
    if len(a) >= 3:
        comm = [r["comm_mib"] for r in a]
        found.append(
            Claim(
                "Study A: communication falls as the start sparsity rises",
                _monotone(comm, rising=False),
                ", ".join(f"{r['start']}: {r['comm_mib']:.0f} MiB" for r in a),
            )
        )
        low = [r for r in a if float(r["start"]) <= 0.5]
        high = [r for r in a if float(r["start"]) >= 0.5]
        if len(low) >= 2 and len(high) >= 2:

            def slope(rows: list[dict]) -> float:
                span = float(rows[-1]["start"]) - float(rows[0]["start"])
                return (rows[-1]["acc"] - rows[0]["acc"]) / span

            # "steeply" is read as a fall larger than the seed spread: a drop within one
            # standard deviation over seeds (at 0.5 or at the highest start) is noise
            drop = high[0]["acc"] - high[-1]["acc"]
            spread = max(high[0].get("acc_std") or 0.0, high[-1].get("acc_std") or 0.0)
            found.append(
                Claim(
                    "Study A: beyond a start sparsity of 0.5 accuracy drops steeply (steeper "
                    "per 0.1 than below 0.5, and by more than the seed spread)",
                    slope(high) < slope(low) and drop > spread,
                    f"accuracy change per +0.1: {100 * slope(low) / 10:+.2f} pp below 0.5, "
                    f"{100 * slope(high) / 10:+.2f} pp above; {100 * drop:.2f} pp lost from "
                    f"{high[0]['start']} to {high[-1]['start']} against a seed std of up to "
                    f"{100 * spread:.2f} pp",
                )
            )
    for name, rows, x in (("B", b, "p2"), ("C", c, "p1")):
        if len(rows) >= 2:
            found.append(
                Claim(
                    f"Study {name}: more {x.upper()} rounds raise accuracy and communication",
                    rows[-1]["acc"] > rows[0]["acc"] and rows[-1]["comm_mib"] > rows[0]["comm_mib"],
                    ", ".join(
                        f"{x.upper()} {r[x]}: {100 * r['acc']:.1f} % / {r['comm_mib']:.0f} MiB"
                        for r in rows
                    ),
                )
            )
    everything = a + b + c
    if len(everything) >= 3:
        ordered = sorted(everything, key=lambda r: r["acc"])
        pairs = list(zip(ordered, ordered[1:]))
        agree = sum(q["comm_mib"] >= p["comm_mib"] for p, q in pairs)
        found.append(
            Claim(
                "an increase in accuracy always comes with an increase in communication",
                agree == len(pairs),
                f"{agree} of {len(pairs)} accuracy-ordered neighbours also rise in communication",
            )
        )
    return found


def body(table: list[dict]) -> list[str]:
    return [
        "## Figure 2's points",
        "",
        "Accuracy and fairness after 3 fine-tuning epochs (%), communication as Eq. 13 counts it "
        "(MiB), final sparsity (%).",
        "",
        *markdown_table(
            table,
            ("study", "p1", "p2", "start"),
            (
                ("acc", "acc %", True),
                ("fairness", "fairness %", True),
                ("comm_mib", "comm MiB", False),
                ("sparsity", "sparsity %", True),
            ),
        ),
    ]


def plot(table: list[dict], path: Path) -> None:
    with figure(path, 3, figsize=(13, 4), sharey=True) as (_, axes):
        for ax, (name, x, title) in zip(
            axes,
            (("A", "start", "start sparsity"), ("B", "p2", "P2 rounds"), ("C", "p1", "P1 rounds")),
        ):
            rows = _study(table, name, x)
            comm = [r["comm_mib"] for r in rows]
            acc = [100 * r["acc"] for r in rows]
            std = [100 * (r.get("acc_std") or 0.0) for r in rows]  # none with one seed
            ax.errorbar(comm, acc, yerr=std, marker="o", capsize=3)
            for r, cx, ay in zip(rows, comm, acc):
                ax.annotate(r[x], (cx, ay), fontsize=7, xytext=(3, 3), textcoords="offset points")
            ax.set_title(f"Study {name}: {title}")
            ax.set_xlabel("communication, Eq. 13 (MiB)")
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("average accuracy after FT 3 (%), ± std over seeds")


STUDY = Study(
    name="phases",
    title="CA-AFP phase sensitivity on WISDM (Figure 2, Table 7), reproduced",
    datasets=("wisdm",),
    default_seeds=3,
    points=points,
    measure=measure,
    paper_columns={},
    claims=claims,
    plot=plot,
    body=body,
)
