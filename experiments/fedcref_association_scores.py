"""Can FedCRef's association test pair clusters of the same class at all? Measured per dataset.

FedCRef associates two clients' clusters when both one-way scores (the alpha-th percentile of
the min-max-normalized error differences, Eq. 2) are <= theta. This script builds the
paper's simulated system with *clean* clusters (every local cluster is one true class), fits
one autoencoder per cluster exactly as the first iteration does (same trainer, epochs and
seeds), and prints, over all pairs of clusters of different clients, the distribution of
the pair's score (the larger of its two one-way scores) for same-class and for
different-class pairs: how many same-class pairs the threshold lets through (recall) and
how many different-class pairs it wrongly lets through.

    python experiments/fedcref_association_scores.py --data-dir ../shared/data

Settings: the reproduction's three (MNIST S = 500; Fashion-MNIST S = 500 with theta 0.15 and
30 epochs; KMNIST test split, S = 100) and MNIST at S = 100, which separates the effect of
S from the dataset's. Seed 0 unless --seed.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fedprune.algorithms.fedcref.association import one_way_score
from fedprune.algorithms.fedcref.experiment import simulated_clients
from fedprune.algorithms.fedcref.local_models import LocalTrainer, cluster_seed
from fedprune.configs.fedcref import SystemConfig

# (label, dataset, split, samples per class, epochs, theta)
SETTINGS = (
    ("mnist S=500", "mnist", "train", 500, 20, 0.2),
    ("mnist S=100", "mnist", "train", 100, 20, 0.2),
    ("kmnist S=100", "kmnist", "test", 100, 20, 0.2),
    ("fashion S=500", "fashion_mnist", "train", 500, 30, 0.15),
)
ALPHA = 75.0


def pair_scores(
    dataset: str,
    split: str,
    samples: int,
    epochs: int,
    seed: int,
    data_dir: str | None,
    num_clients: int = 25,
) -> tuple[np.ndarray, np.ndarray]:
    """Scores of every pair of clean clusters of different clients (``num_clients`` of them,
    S = ``samples``), and whether the pair is of the same class."""
    system = SystemConfig(
        dataset=dataset, split=split, num_clients=num_clients, samples_per_class=samples
    )
    clients = simulated_clients(system, seed, data_dir)
    trainer = LocalTrainer(clients[0].x.shape[1], epochs)
    clusters = [(c, q, cls) for c in clients for q, cls in enumerate(c.classes)]
    models = [
        trainer.fit(c.x[c.labels == cls], cluster_seed(seed, 1, c.client_id, q))
        for c, q, cls in clusters
    ]
    samples_of = [c.x[c.labels == cls] for c, _, cls in clusters]
    # errors[a][b]: model b's per-sample errors on cluster a's samples
    errors = [[trainer.errors(m, x) for m in models] for x in samples_of]
    scores, same = [], []
    for a, (ca, _, cls_a) in enumerate(clusters):
        for b in range(a + 1, len(clusters)):
            cb, _, cls_b = clusters[b]
            if ca.client_id == cb.client_id:
                continue
            forward = one_way_score(errors[a][a], errors[a][b], ALPHA)
            backward = one_way_score(errors[b][b], errors[b][a], ALPHA)
            scores.append(max(forward, backward))
            same.append(cls_a == cls_b)
    return np.array(scores), np.array(same)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(
        "| setting | clusters pairs same / other class | same-class score: median "
        "(q10-q90) | same-class pairs <= theta | other-class median | other-class pairs <= "
        "theta | s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, dataset, split, samples, epochs, theta in SETTINGS:
        started = time.perf_counter()
        scores, same = pair_scores(dataset, split, samples, epochs, args.seed, args.data_dir)
        s, o = scores[same], scores[~same]
        print(
            f"| {label}, theta {theta} | {len(s)} / {len(o)} | {np.median(s):.3f} "
            f"({np.quantile(s, 0.1):.3f}-{np.quantile(s, 0.9):.3f}) | "
            f"{np.mean(s <= theta):.1%} | {np.median(o):.3f} | {np.mean(o <= theta):.2%} | "
            f"{time.perf_counter() - started:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
