"""``fedprune reproduce finetune``: the fine-tuning study of the CA-AFP paper (Figure 3,
Table 9) on real WISDM.

Table 9: phases (0, 0, 50), 70 % sparsity, 10 clients per round; CA-AFP (K = 3), Global-FT
(CA-AFP with K = 1), FedSNIP, EfficientFL, FedCHAR and ClusterFL; fine-tuning lengths
{0, 1, 3, 5, 10, 15, 20, 25} (Table 9 lists {1, 5, ..., 25}, Figure 3 starts at
0), all from one trained run per method and seed, five seeds.
Each method's run *is* its Table 2 run (``<out>/runs/<row>-wisdm-s<seed>``, the same
arguments; Global-FT, not a Table 2 row, as ``global_ft_0_0_50-wisdm-s<seed>``), trained
unless ``fedprune reproduce table2`` already made it in the same ``--out``, then fine-tuned
again for all eight lengths by ``fedprune finetune`` into the study's own run directory. So
FT 3 and FT 25 equal the Table 2 runs' (fine-tuning continues one trajectory and evaluates
after each length; tests check it), and after ``make reproduce-table2`` this study costs 30
fine-tunings (3.3-3.6 min each beside a training), not 30 trainings (6-11 min each). The paper's
numbers, where its text has them (§5.1.3: CA-AFP "from approximately 88% to 96%"), are in
``paper_values/finetune_paper.csv``. ``--quick``: seed 0 only.
"""

from __future__ import annotations

from pathlib import Path

from fedprune.reproduce.study import (
    Claim,
    FineTuneAgain,
    Labels,
    Point,
    Study,
    accuracy_section,
    figure,
    near_paper,
    value_of,
)
from fedprune.reproduce.table2 import ROWS, Row, row_arguments

FT_EPOCHS = (0, 1, 3, 5, 10, 15, 20, 25)
# The six methods of Table 9 / Figure 4 with Table 2's arguments (fedprune/reproduce/table2.py)
COMPARED = {
    "caafp": ("caafp", ("--phases", "0,0,50")),
    "global_ft": ("global_ft", ("--phases", "0,0,50")),
    "fedsnip": ("fedsnip", ()),
    "efficientfl": ("efficientfl", ()),
    "fedchar": ("fedchar", ()),
    "clusterfl": ("clusterfl", ()),
}
PRUNED_BASELINES = ("fedsnip", "efficientfl")
DENSE_CLUSTERED = ("fedchar", "clusterfl")


def base_row(name: str) -> Row:
    """The Table 2 row that trains method ``name`` as this study does (Global-FT, not in
    Table 2, gets a row of the same shape)."""
    method, args = COMPARED[name]
    same = [r for r in ROWS if (r.method, r.args) == (method, args)]
    return same[0] if same else Row(f"{name}_{'_'.join(args[-1].split(','))}", method, args)


def points(quick: bool) -> list[Point]:
    found = []
    for name, (method, args) in COMPARED.items():
        row = base_row(name)
        again = FineTuneAgain(f"{row.name}-wisdm", row_arguments(row, "wisdm"), FT_EPOCHS)
        direct = ("--dataset", "wisdm", *args, "--ft-epochs", ",".join(map(str, FT_EPOCHS)))
        found.append(Point((("method", name),), method, direct, again))
    return found


def measure(summary: dict) -> list[tuple[Labels, dict]]:
    return [
        (
            (("ft", str(e)),),
            {
                "acc": summary["finetune"][str(e)]["avg_acc"],
                "fairness": summary["finetune"][str(e)]["fairness"],
            },
        )
        for e in FT_EPOCHS
    ]


def _acc(table: list[dict], method: str, ft: int) -> float | None:
    return value_of(table, method=method, ft=ft)


def claims(table: list[dict]) -> list[Claim]:
    found = []
    gains = {
        m: _acc(table, m, 25) - _acc(table, m, 0)
        for m in COMPARED
        if _acc(table, m, 25) is not None and _acc(table, m, 0) is not None
    }
    if gains:
        top = max(gains, key=gains.get)
        found.append(
            Claim(
                "CA-AFP gains most from fine-tuning (FT 0 -> 25)",
                top == "caafp",
                ", ".join(f"{m} {100 * g:+.1f} pp" for m, g in gains.items()),
            )
        )
    early = [e for e in (0, 1, 3, 5) if _acc(table, "caafp", e) and _acc(table, "global_ft", e)]
    if early:
        lower = [e for e in early if _acc(table, "global_ft", e) < _acc(table, "caafp", e)]
        found.append(
            Claim(
                "Global-FT is below CA-AFP in the early fine-tuning stages (FT <= 5)",
                len(lower) == len(early),
                f"below at FT {', '.join(map(str, lower)) or 'none'} of {early}",
            )
        )
    late = [
        abs(_acc(table, "caafp", e) - _acc(table, "global_ft", e))
        for e in (10, 15, 20, 25)
        if _acc(table, "caafp", e) is not None and _acc(table, "global_ft", e) is not None
    ]
    if late:
        found.append(
            Claim(
                "10-25 fine-tuning epochs close the gap between CA-AFP and Global-FT (< 1 pp)",
                max(late) < 0.01,
                f"largest gap at FT 10-25: {100 * max(late):.2f} pp",
            )
        )
    for ft, paper in ((0, 0.88), (25, 0.96)):
        ours = _acc(table, "caafp", ft)
        if ours is not None:
            found.append(near_paper(f"CA-AFP at FT {ft}", ours, paper, 0.02))
    return found


def body(table: list[dict]) -> list[str]:
    return accuracy_section("Accuracy after E fine-tuning epochs", table, ("method", "ft"))


def plot(table: list[dict], path: Path) -> None:
    with figure(path, figsize=(7, 4.5)) as (_, ax):
        for method in COMPARED:
            rows = sorted((r for r in table if r["method"] == method), key=lambda r: int(r["ft"]))
            if rows:
                ax.plot(
                    [int(r["ft"]) for r in rows],
                    [100 * r["acc"] for r in rows],
                    marker="o",
                    label=method,
                )
        paper = [(int(r["ft"]), 100 * r["paper_acc"]) for r in table if r.get("paper_acc")]
        if paper:
            ax.scatter(*zip(*paper), color="black", marker="x", zorder=3, label="paper (CA-AFP)")
        ax.set_xlabel("fine-tuning epochs")
        ax.set_ylabel("average accuracy (%)")
        ax.set_title("WISDM: accuracy against fine-tuning epochs")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)


STUDY = Study(
    name="finetune",
    title="Fine-tuning study on WISDM (Figure 3, Table 9), reproduced",
    datasets=("wisdm",),
    default_seeds=5,
    points=points,
    measure=measure,
    paper_columns={"acc": "acc"},
    claims=claims,
    plot=plot,
    body=body,
)
