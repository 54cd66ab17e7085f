"""Measurement: what ``--clusters auto`` of CFL with a fixed K and IFCA chooses on rotated
images, without training.

For each label partition and seed it makes the run's one-shot pass exactly as ``fedprune
train ifca|cfl-fixed --clusters auto`` does before round 1
(:mod:`fedprune.algorithms.ascfl.auto_clusters`: one local epoch per client from the initial
model, the run's batch size and learning rate), then prints the K chosen, the best mean
silhouette (and its K), the ARI of the chosen cut against the rotation groups, and the ARI
of the average-linkage cut into the true number of groups (what the same signals give when
K is known).

    FEDPRUNE_DATA_DIR=../shared/data python experiments/ascfl_cluster_choice.py --seeds 0,1,2
    python experiments/ascfl_cluster_choice.py --labels dirichlet,iid --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def measure(dataset: str, labels: str, alpha: float, seed: int, data_dir: str | None) -> dict:
    """The pass's choice for one partition and seed, and its ARI against the groups."""
    import numpy as np

    from fedprune.algorithms.ascfl import auto_clusters, experiment, metrics
    from fedprune.algorithms.caafp.clustering import cluster_clients
    from fedprune.configs.ascfl import IFCAConfig

    config = IFCAConfig(dataset=dataset, labels=labels, alpha=alpha, seed=seed, clusters="auto")
    fed = experiment.build_federation(config, data_dir)
    spec = experiment.model_spec(config, fed)
    signals = auto_clusters.pass_signals(config, spec, fed)
    start = auto_clusters.choose_start(signals, config.max_clusters)
    groups = np.asarray(fed.group_of_client)
    true_k = len(set(groups.tolist()))
    silhouettes = start.choice.silhouettes
    return {
        "dataset": dataset,
        "labels": labels,
        "alpha": alpha,
        "seed": seed,
        "chosen": start.k,
        "best_k": start.choice.best,
        "best_silhouette": round(silhouettes[start.choice.best], 3),
        "ari_chosen": round(float(metrics.adjusted_rand_index(start.cluster_of, groups)), 3),
        "ari_true_k": round(
            float(metrics.adjusted_rand_index(cluster_clients(signals, true_k), groups)), 3
        ),
        "silhouette": {str(k): round(s, 3) for k, s in sorted(silhouettes.items())},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="mnist")
    parser.add_argument("--labels", default="dirichlet,iid", help="comma-separated")
    parser.add_argument("--alpha", type=float, default=0.4)
    parser.add_argument("--seeds", default="0", help="comma-separated")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    args = parser.parse_args(argv)
    from fedprune.workers import execution

    execution.install()
    rows = []
    try:
        for labels in args.labels.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                row = measure(args.dataset, labels, args.alpha, seed, args.data_dir)
                rows.append(row)
                print(
                    f"{row['labels']:>9} seed {seed}: K = {row['chosen']} (best silhouette "
                    f"{row['best_silhouette']:.3f} at K = {row['best_k']}), ARI of the cut "
                    f"{row['ari_chosen']:.2f}, ARI with the true K {row['ari_true_k']:.2f}; "
                    f"{row['silhouette']}",
                    flush=True,
                )
    finally:
        execution.shutdown()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
