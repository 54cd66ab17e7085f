"""How Fed-HIRE's CPU time grows with the number of objects n and of features d (the
paper's §4.4: "near-linear growth w.r.t. N and d"; its §3.5 bound is O(M d k0 N)).

Letter Recognition on the authors' 8 client splits (14,000 objects, 16 features), seed 0:

* n: every client keeps the first fraction f of its rows, f in 1/8, 1/4, 1/2, 1;
* d: all rows, the first d features, d in 2, 4, 8, 16;
* N by clients (the paper's Fig. 6a varies N = sum of n^(l); this is the reading in which the
  per-client size, and so k0 = 0.5 n^(l), stays put): each of the 8 clients cut into 4
  contiguous quarters (32 clients of ~437 objects), L in 4, 8, 16, 32 of them, taken a quarter
  of every client at a time.

Each point is the CPU seconds of one ``fed_hire`` call (median of ``--repeats``), printed as a
table and plotted to ``--plot`` (default ``results/fedhire_scaling.png``; the figure in
``docs/`` is a copy of one such run) with a straight line through the origin and the largest
point, for comparison. Note that k0 = 0.5 n per client, so
the paper's O(M d k0 N) is quadratic in n when the clients grow and M (epochs) stays put, and
linear in N when N grows by clients of a fixed size; the measurements say which.

    python experiments/bench_fedhire.py [--data-dir DIR] [--repeats 3] [--plot PATH]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from fedprune.algorithms.fedhire import fed_hire
from fedprune.data.table_partition import make_split
from fedprune.data.uci_tabular import load_tabular

FRACTIONS = (0.125, 0.25, 0.5, 1.0)
FEATURES = (2, 4, 8, 16)
CLIENT_COUNTS = (4, 8, 16, 32)
QUARTERS = 4


def quarter_clients(clients: list[np.ndarray]) -> list[np.ndarray]:
    """Every client cut into ``QUARTERS`` contiguous parts, ordered quarter-major: the first
    ``len(clients)`` are the first quarter of every client, and so on."""
    parts = [np.array_split(x, QUARTERS) for x in clients]
    return [p[q] for q in range(QUARTERS) for p in parts]


def cpu_seconds(clients: list[np.ndarray], k_star: int, repeats: int) -> tuple[float, str]:
    """Median CPU seconds of ``repeats`` runs, and the last run's split (clients / server
    CPU seconds, FCPL epochs summed over clients, client milliseconds per epoch)."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        result = fed_hire(clients, k_star, seed=0)
        times.append(time.process_time() - start)
    epochs = sum(result.client_epochs)
    split = (
        f"clients {result.cpu_s_clients:6.2f} s, server {result.cpu_s_server:6.2f} s, "
        f"{epochs:5d} epochs, {1000 * result.cpu_s_clients / max(epochs, 1):5.1f} ms/epoch"
    )
    return statistics.median(times), split


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data-dir", default=None, help="data directory (default: $FEDPRUNE_DATA_DIR)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs per point, median (3)")
    parser.add_argument(
        "--plot",
        default=str(Path(__file__).resolve().parents[1] / "results" / "fedhire_scaling.png"),
        help="where the figure goes (results/fedhire_scaling.png; docs/ holds a copy)",
    )
    args = parser.parse_args(argv)
    Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
    table = load_tabular("letter_recognition", args.data_dir)
    split = make_split("letter_recognition", table.x, table.y, "authors", 8, 0)
    clients = split.client_x()
    k = table.num_classes
    by_n = []
    for f in FRACTIONS:
        part = [x[: max(2, int(round(f * len(x))))] for x in clients]
        seconds, split = cpu_seconds(part, k, args.repeats)
        by_n.append((sum(len(x) for x in part), seconds))
        print(f"n = {by_n[-1][0]:6d}  d = 16  CPU {seconds:6.2f} s ({split})", flush=True)
    by_d = []
    for d in FEATURES:
        seconds, split = cpu_seconds([x[:, :d] for x in clients], k, args.repeats)
        by_d.append((d, seconds))
        print(f"n = {by_n[-1][0]:6d}  d = {d:2d}  CPU {seconds:6.2f} s ({split})", flush=True)
    small = quarter_clients(clients)
    by_clients = []
    for count in CLIENT_COUNTS:
        part = small[:count]
        n = sum(len(x) for x in part)
        seconds, split = cpu_seconds(part, k, args.repeats)
        by_clients.append((n, seconds))
        print(f"L = {count:2d}, N = {n:6d}  d = 16  CPU {seconds:6.2f} s ({split})", flush=True)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, points, label in (
        (axes[0], by_n, "objects n, 8 clients growing (d = 16)"),
        (axes[1], by_d, "features d (all n)"),
        (axes[2], by_clients, f"objects N, {CLIENT_COUNTS[0]}-{CLIENT_COUNTS[-1]} clients of ~437"),
    ):
        xs, ys = zip(*points)
        ax.plot(xs, ys, "o-", label="measured")
        ax.plot([0, xs[-1]], [0, ys[-1]], "--", color="grey", label="linear through the last point")
        ax.set_xlabel(label)
        ax.set_ylabel("CPU seconds, one run")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Fed-HIRE on Letter Recognition (authors' splits, seed 0)")
    fig.tight_layout()
    fig.savefig(args.plot, dpi=110)
    print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
