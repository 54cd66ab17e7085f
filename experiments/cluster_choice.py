"""Measurement: the mean silhouettes ``--clusters auto`` sees on real clients.

For each dataset, partition and seed it computes the two clustering signals exactly as a
``fedprune train caafp`` run does at its clustering step (default phases: round 1, from the
initial model; one local epoch per client, the run's batch size and learning rate; and each
client's label histogram), then the mean silhouette of the average-linkage cut into K = 2..8
clusters of their cosine distances (:mod:`fedprune.algorithms.caafp.choose_k`).

Partitions:

* ``default``: every client keeps all its classes (the paper's setting);
* ``k1``, ``k2``, ...: ``--classes-per-client 1``, ``2``, ... (each client keeps k classes);
* ``iid``: the control with nothing to find: the clients' training windows pooled and dealt
  out again at random, each client keeping its number of windows. The largest silhouette
  here is what noise alone reaches, so :data:`~fedprune.algorithms.caafp.choose_k.MIN_SILHOUETTE`
  must lie above it.

    FEDPRUNE_DATA_DIR=../shared/data python experiments/cluster_choice.py --seeds 0,1,2
    python experiments/cluster_choice.py --datasets uci_har --partitions iid --json out.json

``--noise 0.25,0.5,1`` also measures ``--cluster-signal-noise`` (:mod:`fedprune.privacy.local`):
for each noise multiplier, each signal clipped (``--clip-labels``, ``--clip-update``) and
noised ``--repeats`` times (TF Privacy's noise is unseeded), the K chosen each time, how
often it is the noiseless K, the ARI of the noised clusters against the noiseless ones, and
each client's ε at δ = 1e-5 for that one upload.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

PARTITIONS = ("default", "k1", "iid")  # the defaults of --partitions
MAX_K = 8


def pooled(clients: tuple, seed: int) -> list:
    """The clients' training windows dealt out again at random (same sizes, same test sets)."""
    x = np.concatenate([c.x_train for c in clients])
    y = np.concatenate([c.y_train for c in clients])
    order = np.random.default_rng(seed).permutation(len(y))
    out, start = [], 0
    for c in clients:
        rows = order[start : start + c.num_train]
        start += c.num_train
        out.append(dataclasses.replace(c, x_train=x[rows], y_train=y[rows]))
    return out


@dataclasses.dataclass(frozen=True)
class NoiseGrid:
    """What ``--noise`` asks for: multipliers, each signal's clip, repeats per setting."""

    multipliers: tuple[float, ...] = ()
    clip_labels: float = 1.0
    clip_update: float = 1.0
    repeats: int = 5


def noised_choices(signal: np.ndarray, clip: float, grid: NoiseGrid) -> list[dict]:
    """Per noise multiplier: the K chosen on ``grid.repeats`` noised copies of ``signal``,
    against the noiseless choice (K and ARI of the clusters)."""
    from sklearn.metrics import adjusted_rand_score

    from fedprune.algorithms.caafp.choose_k import choose_clusters
    from fedprune.algorithms.caafp.clustering import cluster_clients
    from fedprune.privacy.local import UploadNoise

    exact = choose_clusters(signal, MAX_K)
    exact_labels = cluster_clients(signal, exact.chosen) if exact.chosen > 1 else None
    rows = []
    for z in grid.multipliers:
        noise = UploadNoise(z, clip)
        ks, aris = [], []
        for _ in range(grid.repeats):
            noised = noise.apply(signal)
            k = choose_clusters(noised, MAX_K).chosen
            ks.append(k)
            if exact_labels is not None:
                labels = cluster_clients(noised, k) if k > 1 else np.zeros(len(signal), int)
                aris.append(adjusted_rand_score(exact_labels, labels))
        rows.append(
            {
                "z": z,
                "clip": clip,
                "epsilon": round(noise.record(1)["epsilon"], 2),
                "k_exact": exact.chosen,
                "k": ks,
                "same_k": sum(k == exact.chosen for k in ks) / len(ks),
                "ari": round(float(np.mean(aris)), 3) if aris else None,
            }
        )
    return rows


def measure(
    dataset: str, partition: str, seed: int, data_dir: str | None, grid: NoiseGrid | None = None
) -> dict:
    """Silhouettes per K of both signals for one dataset, partition and seed (and, with
    ``grid.multipliers``, the choices on noised signals)."""
    grid = grid or NoiseGrid()
    import tensorflow_federated as tff

    from fedprune.algorithms.caafp.choose_k import choose_clusters
    from fedprune.algorithms.caafp.label_histograms import label_histograms
    from fedprune.configs.pipeline import CAAFPConfig
    from fedprune.configs.protocol import with_protocol
    from fedprune.data.registry import har_recipe, load_recorded
    from fedprune.engine.client_work import LocalTraining
    from fedprune.engine.updates import build_update_computation, client_updates
    from fedprune.models.spec import ModelSpec

    kept = int(partition[1:]) if partition.startswith("k") else None
    config = CAAFPConfig(dataset, seed=seed, classes_per_client=kept, clusters="auto")
    config = with_protocol(config, None)
    data = load_recorded(har_recipe(config), data_dir)
    clients = list(data.clients)
    if partition == "iid":
        clients = pooled(data.clients, seed)
    spec = ModelSpec(data.input_shape, data.num_classes, config.seed)
    init = [np.asarray(w) for w in spec.initial_weights().trainable]
    training = LocalTraining(1, config.learning_rate, statistics=False)
    updates = client_updates(  # the clustering step of phases (0, 0, T2): round 1
        build_update_computation(spec, training),
        tff.learning.models.ModelWeights(init, []),
        clients,
        config.seed,
        config.batch_size,
        round_num=1,
    )
    histograms = label_histograms([c.y_train for c in clients], data.num_classes)
    result = {"dataset": dataset, "partition": partition, "seed": seed, "clients": len(clients)}
    for name, signal in (("update", updates), ("labels", histograms)):
        choice = choose_clusters(signal, MAX_K)
        result[name] = {str(k): round(s, 4) for k, s in choice.silhouettes.items()}
        result[name + "_best"] = choice.best
        if grid.multipliers:
            clip = grid.clip_labels if name == "labels" else grid.clip_update
            if name == "update":
                norms = np.linalg.norm(signal, axis=1)
                result["update_norm_min_median_max"] = [
                    round(float(v), 4) for v in (norms.min(), np.median(norms), norms.max())
                ]
            result[name + "_noised"] = noised_choices(signal, clip, grid)
    return result


def table(results: list[dict]) -> str:
    """Markdown: one row per dataset, partition, seed and signal; silhouette per K."""
    ks = [str(k) for k in range(2, MAX_K + 1)]
    lines = [
        "| dataset | partition | seed | signal | " + " | ".join(f"K={k}" for k in ks) + " | best |",
        "|---" * (5 + len(ks)) + "|",
    ]
    for r in results:
        for name in ("update", "labels"):
            values = [f"{r[name][k]:.3f}" if k in r[name] else "" for k in ks]
            best = r[name + "_best"]
            lines.append(
                f"| {r['dataset']} | {r['partition']} | {r['seed']} | {name} | "
                + " | ".join(values)
                + f" | {best} ({r[name][str(best)]:.3f}) |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="uci_har,wisdm")
    parser.add_argument("--partitions", default=",".join(PARTITIONS))
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--json", default=None, help="also write the results to this file")
    parser.add_argument("--noise", default="", help="noise multipliers to measure, e.g. 0.5,1")
    parser.add_argument("--clip-labels", type=float, default=1.0)
    parser.add_argument("--clip-update", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    grid = NoiseGrid(
        tuple(float(z) for z in args.noise.split(",") if z),
        args.clip_labels,
        args.clip_update,
        args.repeats,
    )
    from fedprune.workers import execution

    execution.install()
    results = []
    try:
        for dataset in args.datasets.split(","):
            for partition in args.partitions.split(","):
                for seed in (int(s) for s in args.seeds.split(",")):
                    results.append(measure(dataset, partition, seed, args.data_dir, grid))
                    print(json.dumps(results[-1]), flush=True)
    finally:
        execution.shutdown()
    print(table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
