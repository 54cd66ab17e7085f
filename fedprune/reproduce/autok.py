"""``fedprune reproduce autok``: the number of clusters chosen from the data against the
number the papers fix, on every clustered trainer that takes one.

Not a paper's table: fedprune's own comparison of ``--clusters auto`` (the one-shot
silhouette choice, :mod:`fedprune.algorithms.caafp.choose_k`) and FedCRef's
``--local-k auto`` (:mod:`fedprune.algorithms.fedcref.local_k`) with the fixed values, point
for point with the same arguments otherwise:

* ``table2`` -- CA-AFP (0,0,50) on Table 2's cells (UCI-HAR and WISDM, time-ordered split,
  fine-tuning 3 and 25 epochs): ``--clusters 3`` (the paper's K) against ``auto``.
* ``noniid`` -- the non-IID study's WISDM clients with k = 1, 2, 3 classes each, no
  fine-tuning (:mod:`fedprune.reproduce.noniid`'s arguments): ``--clusters 3`` against
  ``auto``.
* ``rotated`` -- IFCA on rotated MNIST (:mod:`fedprune.reproduce.ascfl`'s arguments, K = 4
  rotation groups): ``--clusters 4`` against ``auto``, with the default label-skewed
  clients (Dirichlet alpha 0.4) and with clients that differ only by rotation
  (``--labels iid``); the ARI of the final clusters against the rotation groups.
* ``fedcref`` -- FedCRef on its three datasets (:mod:`fedprune.reproduce.fedcref`'s
  settings) from the autoencoder + k-means start: K_i = the client's number of classes
  (``--init kmeans-ae``) against ``--local-k auto``. Interpretation: the paper's nine
  settings vary the dirtiness of the simulated start (``--init dirty``), which takes K_i from
  the classes and so cannot take a chosen K_i; a start from the data itself is the one where
  choosing K_i means something, hence three settings, not nine.

The goals checked (:func:`claims`): on every Table 2 cell ``auto`` is at most 1 pp below
``--clusters 3``; at non-IID k = 1 it is at least 5 pp above. ``--quick``: seed 0. Every
point is an ordinary ``fedprune train`` run under ``<out>/runs/``, kept and resumed as in
the other studies.
"""

from __future__ import annotations

from pathlib import Path

from fedprune.reproduce.fedcref import SETTINGS
from fedprune.reproduce.study import (
    Claim,
    Labels,
    Point,
    Study,
    figure,
    grouped_bars,
    markdown_table,
    row_of,
    value_of,
)
from fedprune.reproduce.table2 import ROWS, row_arguments

CHOICES = ("fixed", "auto")
TABLE2_DATASETS = ("uci_har", "wisdm")
NONIID_LEVELS = (1, 2, 3)
LABELS = ("dirichlet", "iid")  # rotated MNIST: label-skewed (alpha 0.4) or rotation only
PAPER_K = 3  # CA-AFP's K for every dataset and scenario
ROTATION_GROUPS = 4


(CAAFP,) = [r for r in ROWS if r.name == "caafp_0_0_50"]  # Table 2's CA-AFP (0,0,50) row


def _clusters(choice: str, fixed: int) -> tuple[str, ...]:
    return ("--clusters", "auto" if choice == "auto" else str(fixed))


def points(quick: bool) -> list[Point]:
    """The grid of the module docstring (the same with ``quick``: only the seeds differ)."""
    found = [
        Point(
            (("part", "table2"), ("dataset", d), ("clusters", c)),
            "caafp",
            (*row_arguments(CAAFP, d), *_clusters(c, PAPER_K)),
        )
        for d in TABLE2_DATASETS
        for c in CHOICES
    ]
    found += [
        Point(
            (("part", "noniid"), ("dataset", "wisdm"), ("k", str(k)), ("clusters", c)),
            "caafp",
            (
                "--dataset",
                "wisdm",
                *CAAFP.args,
                "--classes-per-client",
                str(k),
                "--ft-epochs",
                "0",
                *_clusters(c, PAPER_K),
            ),
        )
        for k in NONIID_LEVELS
        for c in CHOICES
    ]
    found += [
        Point(
            (("part", "rotated"), ("dataset", "mnist"), ("labels", labels), ("clusters", c)),
            "ifca",
            (
                "--dataset",
                "mnist",
                *(("--alpha", "0.4") if labels == "dirichlet" else ("--labels", "iid")),
                *_clusters(c, ROTATION_GROUPS),
            ),
        )
        for labels in LABELS
        for c in CHOICES
    ]
    found += [
        Point(
            (("part", "fedcref"), ("dataset", s.dataset), ("clusters", c)),
            "fedcref",
            (
                "--dataset",
                s.dataset,
                *s.args,
                *(("--local-k", "auto") if c == "auto" else ("--init", "kmeans-ae")),
            ),
        )
        for s in SETTINGS
        for c in CHOICES
    ]
    return found


def _k(summary: dict) -> float:
    """The number of clusters a CA-AFP run trained: chosen, or the fixed K."""
    if "clusters_chosen" in summary:
        return float(summary["clusters_chosen"])
    return float(len(summary.get("clusters", {})) or PAPER_K)


def measure(summary: dict) -> list[tuple[Labels, dict]]:
    """One row per fine-tuning length (CA-AFP), or one per run (IFCA, FedCRef): accuracy
    and what the choice decided (K; IFCA's ARI; FedCRef's communities and K_i error)."""
    method = summary.get("method")
    if method == "caafp":
        return [
            (
                (("ft", ft),),
                {"acc": r["avg_acc"], "fairness": r["fairness"], "K": _k(summary)},
            )
            for ft, r in sorted(summary["finetune"].items(), key=lambda item: int(item[0]))
        ]
    if method == "ifca":
        return [
            (
                (),
                {
                    "acc": summary["final_acc"],
                    "ari": summary["ari"],
                    "K": float(summary.get("clusters_chosen", summary["clusters"])),
                },
            )
        ]
    return [
        (
            (),
            {
                "acc": summary["acc_final"],
                "communities": float(summary["communities"]),
                "K": float(summary["mean_k"]),
                "k_error": summary.get("local_k_mean_abs_diff", 0.0),
            },
        )
    ]


def _gap(table: list[dict], **labels: str) -> float | None:
    """auto - fixed accuracy of one cell; None while a side is missing."""
    auto = value_of(table, clusters="auto", **labels)
    fixed = value_of(table, clusters="fixed", **labels)
    return None if auto is None or fixed is None else auto - fixed


def claims(table: list[dict]) -> list[Claim]:
    """The goals of the module docstring, on the rows there are."""
    found = []
    cells = {
        (d, ft): _gap(table, part="table2", dataset=d, ft=ft)
        for d in TABLE2_DATASETS
        for ft in ("3", "25")
    }
    known = {cell: gap for cell, gap in cells.items() if gap is not None}
    if known:
        found.append(
            Claim(
                "on every Table 2 cell, auto K is at most 1 pp below K = 3",
                all(gap >= -0.01 for gap in known.values()) if len(known) == len(cells) else None,
                ", ".join(f"{d} FT{ft}: {100 * g:+.2f} pp" for (d, ft), g in known.items()),
            )
        )
    extreme = _gap(table, part="noniid", k="1", ft="0")
    if extreme is not None:
        found.append(
            Claim(
                "at non-IID k = 1, auto K is at least 5 pp above K = 3",
                extreme >= 0.05,
                f"{100 * extreme:+.2f} pp",
            )
        )
    return found


def body(table: list[dict]) -> list[str]:
    """One table per part."""
    parts = (
        ("table2", "Table 2's CA-AFP cells: K = 3 against auto", ("dataset", "ft", "clusters")),
        ("noniid", "Non-IID WISDM (k classes per client, no fine-tuning)", ("k", "clusters")),
        ("rotated", "IFCA on rotated MNIST: K = 4 against auto", ("labels", "clusters")),
        ("fedcref", "FedCRef: K_i = classes against --local-k auto", ("dataset", "clusters")),
    )
    values = {
        "table2": (("acc", "acc %", True), ("fairness", "fairness %", True), ("K", "K", False)),
        "noniid": (("acc", "acc %", True), ("fairness", "fairness %", True), ("K", "K", False)),
        "rotated": (("acc", "acc %", True), ("ari", "ARI", False), ("K", "K", False)),
        "fedcref": (
            ("acc", "ACC %", True),
            ("communities", "communities", False),
            ("K", "mean K_i", False),
            ("k_error", "mean |K_i - classes|", False),
        ),
    }
    lines: list[str] = []
    for part, heading, labels in parts:
        rows = [r for r in table if r.get("part") == part]
        if rows:
            lines += [f"## {heading}", "", *markdown_table(rows, labels, values[part]), ""]
    return lines


def plot(table: list[dict], path: Path) -> None:
    """Accuracy of fixed and auto K side by side, one group per cell."""
    cells = [
        (f"{d} FT{ft}", {"part": "table2", "dataset": d, "ft": ft})
        for d in TABLE2_DATASETS
        for ft in ("3", "25")
    ]
    cells += [(f"non-IID k={k}", {"part": "noniid", "k": str(k)}) for k in NONIID_LEVELS]
    cells += [(f"IFCA {labels}", {"part": "rotated", "labels": labels}) for labels in LABELS]
    cells += [(f"FedCRef {s.dataset}", {"part": "fedcref", "dataset": s.dataset}) for s in SETTINGS]
    series = []
    for choice in CHOICES:
        rows = [row_of(table, clusters=choice, **labels) for _, labels in cells]
        values = [None if r is None else 100 * r["acc"] for r in rows]
        errors = [0.0 if r is None else 100 * (r.get("acc_std") or 0.0) for r in rows]
        series.append(("K fixed" if choice == "fixed" else "K auto", values, errors))
    with figure(path, figsize=(11, 4.5)) as (_, ax):
        grouped_bars(ax, [name for name, _ in cells], series)
        ax.set_ylabel("accuracy (%), mean ± std over seeds")
        ax.set_title("The number of clusters: fixed against chosen from the data")
        ax.tick_params(axis="x", labelrotation=30)


STUDY = Study(
    name="autok",
    title="The number of clusters chosen from the data against the papers' fixed K",
    datasets=("uci_har", "wisdm", "mnist", "fashion_mnist"),
    default_seeds=5,
    points=points,
    measure=measure,
    paper_columns={},
    from_paper=False,
    claims=claims,
    plot=plot,
    body=body,
    notes=(
        "fixed = the papers' K (CA-AFP 3, IFCA 4 rotation groups, FedCRef each client's "
        "number of classes); auto = chosen from the data before training.",
        "KMNIST (FedCRef) has only its test split; its runs check it themselves.",
    ),
)
