"""A run of AS-CFL or a baseline (CFL, CFL with a fixed K, IFCA; FedAvg = IFCA with K = 1)
on the shared round loop and run directory.

The federation is :func:`fedprune.data.rotated_partition.partition_rotated` of the official
splits; the clients train on TFF (:mod:`fedprune.engine.per_client`), the server re-forms
the clusters and aggregates (:mod:`fedprune.algorithms.ascfl.server`). Files in ``--out``:
``config.json``, ``metrics.csv`` (per round: learning rate, mean and pooled client test
accuracy, training loss, clusters, ARI against the rotation groups, Jaccard stability of
memberships, uplink/downlink MB, low-rank rank), ``checkpoint.npz`` while running and
``summary.json`` (final and peak accuracy, rounds to 90 % of the peak, clusters, ARI,
stability, bytes, (ε, δ) when noise is on, wall time).

Accuracy is each client's accuracy on its own test images (its labels and rotation) under
its cluster's model after the round's aggregation; "acc" is the mean over clients, as the
paper's per-client personalized models imply; "acc_pooled" counts every test image once.
"""

from __future__ import annotations

import dataclasses
import itertools
import os

import numpy as np
import tensorflow as tf

from fedprune.algorithms.ascfl import metrics, noisy_aggregation, server, similarity
from fedprune.configs.ascfl import ClusteredImageConfig
from fedprune.data.images import load_images
from fedprune.data.rotated_partition import RotatedFederatedData, partition_rotated
from fedprune.engine import per_client
from fedprune.engine.loop import Step, run_rounds
from fedprune.models.spec import ModelSpec
from fedprune.runs import RunDir

MB = 1e6
DELTA = 1e-5  # δ of the reported (ε, δ) (the paper's value is lost from our copy)


def build_federation(
    config: ClusteredImageConfig, data_dir: str | os.PathLike | None
) -> RotatedFederatedData:
    train = load_images(config.dataset, "train", data_dir)
    test = load_images(config.dataset, "test", data_dir)
    return partition_rotated(
        train,
        test,
        num_clients=config.num_clients,
        alpha=config.alpha,
        seed=config.seed,
        min_frac=config.min_frac,
        max_frac=config.max_frac,
        proxy_size=config.proxy_size,
        proxy_rotation=config.proxy_rotation,
        iid_labels=config.labels == "iid",
    )


def _adjustment_columns(regrouped: server.Regrouped) -> dict:
    """AS-CFL's Stage 1 and 2 in numbers (empty for the baselines): clusters the incentive
    formed; the largest and the median ``G_k`` entering the split/merge pass (finite values
    only); splits made, splits the guard refused, merges made."""
    adjustment = regrouped.adjustment
    columns = {
        "incentive_clusters": ""
        if regrouped.incentive_clusters is None
        else regrouped.incentive_clusters,
        "g_max": "",
        "g_median": "",
        "splits": "",
        "refused_splits": "",
        "merges": "",
    }
    if adjustment is None:
        return columns
    ratio = adjustment.geometry.ratio
    finite = ratio[np.isfinite(ratio)]
    if finite.size:
        columns["g_max"] = round(float(finite.max()), 6)
        columns["g_median"] = round(float(np.median(finite)), 6)
    columns["splits"] = len(adjustment.splits)
    columns["refused_splits"] = adjustment.refused_splits
    columns["merges"] = len(adjustment.merges)
    return columns


def local_epochs(config: ClusteredImageConfig, examples: int) -> int:
    """AS-CFL's local epochs of a client with ``examples`` training examples (§3.2.3, "the
    ceiling of the batch size divided by the local data size", with Algorithm 1 line 7's
    minimum): E_i = max(E, ceil(BS / n_i)). Reading: the minimum is ``--local-epochs`` (the
    paper's 10 at ``--scale paper``), so only a client with fewer examples than a batch
    trains more than E epochs."""
    return max(int(config.local_epochs), -(-int(config.batch_size) // max(int(examples), 1)))


def head_layers(spec: ModelSpec, layers: str) -> list[tf.keras.layers.Layer]:
    """The layers whose updates the low-rank step factorizes (reading #2 of
    :mod:`fedprune.algorithms.ascfl`, "weights near the output layer"): the output layer
    (``layers="output"``), or every Dense layer after the last layer with weights that is not
    Dense (``"dense_head"``: the classifier on top of the convolutions)."""
    weighted = [layer for layer in spec.keras().layers if layer.trainable_weights]
    if layers == "output":
        return weighted[-1:]
    dense = itertools.takewhile(lambda x: isinstance(x, tf.keras.layers.Dense), weighted[::-1])
    return list(dense)[::-1]


def low_rank_tensors(spec: ModelSpec, layers: str) -> int:
    """How many trailing weight tensors (kernels and biases) of ``spec``'s model the low-rank
    step factorizes."""
    return sum(len(layer.trainable_weights) for layer in head_layers(spec, layers))


def settings_of(config: ClusteredImageConfig, spec: ModelSpec) -> server.ServerSettings:
    """The server's settings for ``config``'s method on ``spec``'s model (the model tells
    AS-CFL how many trailing tensors its low-rank step factorizes; other methods never use
    the low-rank step, so their model is not built for it)."""
    method = "fedavg" if config.method == "ifca" and config.clusters == 1 else config.method
    tensors = (
        low_rank_tensors(spec, config.low_rank_layers)
        if method == "ascfl"
        else server.ServerSettings.low_rank_tensors  # unused by the other methods
    )
    return server.ServerSettings(
        method=method,
        incentive=config.without != "incentive",
        adjustment=config.without != "adjustment",
        low_rank=config.without != "low-rank",
        explained_variance=config.explained_variance,
        low_rank_tensors=tensors,
        admission=config.admission,
        gain=config.gain,
        theta=config.theta,
        split_threshold=config.split_threshold,
        merge_threshold=config.merge_threshold,
        unit_vectors=config.em_space == "unit",
        singletons=config.singletons,
        split_guard=config.split_guard,
        merge_guard=config.merge_guard,
        update_reference=config.update_reference,
        stage1=config.stage1,
        clip_norm=config.clip_norm,
        noise_multiplier=config.noise_multiplier,
        clusters=config.clusters,
        eps1=config.eps1,
        eps2=config.eps2,
    )


@dataclasses.dataclass
class ClusterState:
    """The cluster models, each client's cluster, the last round's labels (stability) and
    the last split (AS-CFL's no-reunite guard)."""

    models: list[list[np.ndarray]]
    cluster_of: np.ndarray  # per client id
    previous_splits: tuple = ()
    # per client id: absent when Stage 1 formed the clusters and not placed since (late)
    late: np.ndarray | None = None

    def to_checkpoint(self) -> tuple[dict, dict]:
        tensors = len(self.models[0])
        arrays = {
            "models": [w for m in self.models for w in m],
            "cluster_of": [self.cluster_of],
            "splits": [_encode_split(pair, len(self.cluster_of)) for pair in self.previous_splits],
        }
        if self.late is not None:
            arrays["late"] = [self.late.astype(np.int64)]
        return arrays, {"tensors": float(tensors)}

    @classmethod
    def from_checkpoint(cls, arrays: dict, scalars: dict) -> ClusterState:
        flat, tensors = arrays["models"], int(scalars["tensors"])
        models = [list(flat[i : i + tensors]) for i in range(0, len(flat), tensors)]
        splits = tuple(_decode_split(a) for a in arrays.get("splits", []))
        late = np.asarray(arrays["late"][0]).astype(bool) if "late" in arrays else None
        return cls(models, np.asarray(arrays["cluster_of"][0]), splits, late)


def checkpoint_shapes(
    arrays: dict, spec: ModelSpec, num_clients: int, slots: int
) -> dict[str, list[tuple[int, ...]]]:
    """The shapes a checkpoint's arrays must have (:class:`ClusterState`): each cluster's
    model is ``spec``'s (as many whole models as it holds, at most ``slots``), and one entry
    per client in the others."""
    model = [tuple(np.shape(w)) for w in spec.initial_weights().trainable]
    held = len(arrays.get("models", []))
    models = min(max(1, -(-held // len(model))), slots)  # a part of a model is a mismatch
    per_client = (num_clients,)
    return {
        "models": model * models,
        "cluster_of": [per_client],
        "splits": [per_client] * len(arrays.get("splits", [])),
        "late": [per_client],
    }


def _encode_split(pair: tuple, n: int) -> np.ndarray:
    code = np.zeros(n, dtype=np.int64)
    for side, members in enumerate(pair, 1):
        code[list(members)] = side
    return code


def _decode_split(code: np.ndarray) -> tuple:
    return tuple(frozenset(np.flatnonzero(code == side).tolist()) for side in (1, 2))


class Evaluator:
    """Server-side accuracy of a model: on the proxy set, and on each client's test images."""

    def __init__(self, spec: ModelSpec, fed: RotatedFederatedData):
        self.model = spec.keras()
        self.fed = fed

    def _accuracy(self, weights: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> int:
        self.model.set_weights(weights)
        probs = self.model.predict(x, batch_size=512, verbose=0)
        return int(np.sum(np.argmax(probs, axis=-1) == y))

    def proxy(self, weights: list[np.ndarray]) -> float:
        return self._accuracy(weights, self.fed.proxy_x, self.fed.proxy_y) / len(self.fed.proxy_y)

    def clients(self, models: list[list[np.ndarray]], cluster_of: np.ndarray) -> np.ndarray:
        """``[clients, 2]``: correct predictions and test images per client."""
        out = np.zeros((len(cluster_of), 2), dtype=np.int64)
        for k, weights in enumerate(models):
            for c in np.flatnonzero(cluster_of == k):
                client = self.fed.clients[c]
                out[c] = self._accuracy(weights, client.x_test, client.y_test), len(client.y_test)
        return out


def _reporting(config: ClusteredImageConfig, t: int) -> np.ndarray:
    """The clients that report in round ``t`` (all but a seeded ``client_dropout`` share)."""
    n = config.num_clients
    drop = n - config.reporting_clients
    rng = np.random.default_rng([config.seed, t, 1807])
    return np.sort(rng.permutation(n)[drop:])


def run_clustered_images(
    config: ClusteredImageConfig,
    out: str | os.PathLike,
    data_dir: str | os.PathLike | None = None,
    progress: bool = True,
) -> dict:
    """Run (or resume, or return the finished) run in ``out``; returns the summary."""
    recorded = config.recorded()
    run = RunDir.existing(out, recorded)
    if run is not None and run.finished:
        return run.read_summary()
    fed = build_federation(config, None if data_dir is None else str(data_dir))
    run = run or RunDir(out, recorded)
    num_classes = int(max(max(c.y_train.max() for c in fed.clients), fed.proxy_y.max())) + 1
    spec = ModelSpec(fed.federated.input_shape, num_classes, seed=config.seed, model=config.model)
    settings = settings_of(config, spec)
    start_models = config.clusters if settings.method == "ifca" else 1
    # One computation for the whole run, traced before the evaluator's Keras model exists
    # (tracing in a TF graph invalidates Keras models built before it): the server's model
    # stack has one slot per client (at most N clusters), unused slots repeat model 0.
    slots = config.clusters if settings.method == "ifca" else config.num_clients
    per_client_epochs = settings.method == "ascfl" and config.epochs_rule == "data_size"
    update_round = per_client.build_update_round(
        spec, 1 if per_client_epochs else config.local_epochs, slots
    )
    # clients absent when Stage 1 formed the clusters pick their cluster by loss (IFCA's rule)
    placing = config.has_late_clients and config.late_clients == "lowest_loss"
    loss_round = (
        per_client.build_loss_round(spec, slots) if settings.method == "ifca" or placing else None
    )
    evaluator = Evaluator(spec, fed)
    groups = np.asarray(fed.group_of_client)
    params = int(sum(w.size for w in spec.initial_weights().trainable))
    output_shape = spec.initial_weights().trainable[-2].shape
    head_size = int(
        sum(w.size for w in spec.initial_weights().trainable[-settings.low_rank_tensors :])
    )

    def lowrank_uplink_floats(rank: int) -> int:
        """One client's uplink under the shared-basis reading of the low-rank step."""
        if config.low_rank_layers == "output":
            return similarity.uplink_floats(params, output_shape, rank)
        return similarity.shared_basis_floats(params, head_size, rank)

    def initial() -> ClusterState:
        base = spec.initial_weights().trainable
        if start_models == 1:
            return ClusterState([list(base)], np.zeros(config.num_clients, dtype=np.int64))
        # IFCA: K models from K seeds (the paper's "random initialization" of each model)
        models = [
            ModelSpec(
                spec.input_shape, num_classes, seed=config.seed * 1000 + k, model=config.model
            )
            .initial_weights()
            .trainable
            for k in range(config.clusters)
        ]
        return ClusterState(models, np.zeros(config.num_clients, dtype=np.int64))

    def padded(models: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        return list(models) + [models[0]] * (slots - len(models))

    def step(t: int, state: ClusterState) -> Step[ClusterState]:
        lr = config.learning_rate * config.lr_decay ** (t - 1)
        ids = _reporting(config, t)
        clients = [fed.clients[i] for i in ids]
        cluster_of = state.cluster_of.copy()
        k = len(state.models)
        late = state.late.copy() if state.late is not None else None
        placed = ids[late[ids]] if placing and late is not None and k > 1 else ids[:0]
        if settings.method == "ifca" and k > 1:
            losses = per_client.run_loss_round(loss_round, state.models, clients, config.batch_size)
            cluster_of[ids] = np.argmin(losses, axis=1)
        elif len(placed):  # a late client receives every cluster's model once
            joining = [fed.clients[i] for i in placed]
            losses = per_client.run_loss_round(
                loss_round, padded(state.models), joining, config.batch_size
            )
            cluster_of[placed] = np.argmin(losses[:, :k], axis=1)
            late[placed] = False
        got = per_client.run_update_round(
            update_round,
            padded(state.models),
            lr,
            {int(i): int(cluster_of[i]) for i in ids},
            clients,
            t,
            config.seed,
            config.batch_size,
            [local_epochs(config, len(c.y_train)) for c in clients] if per_client_epochs else None,
        )
        rng = np.random.default_rng([config.seed, t, 1808])
        warming = settings.method == "ascfl" and t <= config.warmup_rounds
        regrouped = server.regroup(
            state.models,
            {int(i): int(cluster_of[i]) for i in ids},
            got,
            dataclasses.replace(settings, method="fedavg") if warming else settings,
            evaluator.proxy,
            rng,
            state.previous_splits,
            first_round=t == config.warmup_rounds + 1,
        )
        new_of = cluster_of.copy()
        if settings.method != "ifca":  # clusters renumbered: non-reporting clients follow
            remap = {}
            for cid, k_new in regrouped.cluster_of.items():
                remap.setdefault(int(cluster_of[cid]), k_new)
            for c in range(config.num_clients):
                if c in regrouped.cluster_of:
                    new_of[c] = regrouped.cluster_of[c]
                else:
                    new_of[c] = remap.get(int(cluster_of[c]), 0)
        else:
            for cid, k_new in regrouped.cluster_of.items():
                new_of[cid] = k_new
        if placing and t == config.warmup_rounds + 1:  # Stage 1 formed the clusters
            late = np.ones(config.num_clients, dtype=bool)
            late[ids] = False
        correct = evaluator.clients(regrouped.models, new_of)
        acc = correct[:, 0] / np.maximum(correct[:, 1], 1)
        update_floats = params * len(ids)
        rank = regrouped.rank
        row = {
            "round": t,
            "lr": round(lr, 6),
            "acc": round(float(acc.mean()), 6),
            "acc_pooled": round(float(correct[:, 0].sum() / correct[:, 1].sum()), 6),
            "train_loss": round(float(np.average(got.loss, weights=got.examples)), 6),
            "clusters": len(set(new_of.tolist())),
            "ari": round(float(metrics.adjusted_rand_index(new_of, groups)), 6),
            "stability": round(float(metrics.membership_jaccard(state.cluster_of, new_of)), 6),
            "uplink_mb": round(4 * update_floats / MB, 6),
            "uplink_lowrank_mb": round(
                4 * len(ids) * lowrank_uplink_floats(rank) / MB,
                6,
            )
            if rank is not None
            else "",
            "downlink_mb": round(
                4
                * params
                * (len(ids) * (k if settings.method == "ifca" else 1) + len(placed) * (k - 1))
                / MB,
                6,
            ),
            "rank": "" if rank is None else rank,
            "reporting": len(ids),
            **_adjustment_columns(regrouped),
        }
        new = ClusterState(regrouped.models, new_of, tuple(regrouped.splits), late)
        postfix = {"acc": f"{row['acc']:.3f}", "K": str(row["clusters"])}
        return Step(new, [row], postfix)

    result = run_rounds(
        run,
        initial,
        lambda _done, arrays, scalars: ClusterState.from_checkpoint(arrays, scalars),
        step,
        config.rounds,
        desc=f"{config.method} {config.dataset} alpha={config.alpha:g}",
        progress=progress,
        wall_column="wall_s",
        shapes=lambda arrays: checkpoint_shapes(arrays, spec, config.num_clients, slots),
    )
    rows = run.metrics_rows()
    accs = [float(r["acc"]) for r in rows]
    last = rows[-1]
    summary = {
        "method": config.method,
        "dataset": config.dataset,
        "labels": config.labels,  # alpha applies to the Dirichlet label split only
        "alpha": config.alpha,
        "seed": config.seed,
        "rounds": result.rounds,
        "final_acc": accs[-1],
        "peak_acc": max(accs),
        "rounds_to_90pct_peak": metrics.rounds_to_fraction_of_peak(accs, 0.9),
        "clusters": int(last["clusters"]),
        "ari": float(last["ari"]),
        "mean_stability": float(np.mean([float(r["stability"]) for r in rows[1:]] or [1.0])),
        "uplink_mb": float(sum(float(r["uplink_mb"]) for r in rows)),
        "downlink_mb": float(sum(float(r["downlink_mb"]) for r in rows)),
        "params": params,
        "wall_s": float(last["wall_s"]),
    }
    if any(r.get("uplink_lowrank_mb") for r in rows):
        # rounds without the low-rank step (the FedAvg warm-up) upload the full update
        summary["uplink_lowrank_mb"] = float(
            sum(float(r.get("uplink_lowrank_mb") or r["uplink_mb"]) for r in rows)
        )
    if config.noise_multiplier > 0:
        spent = noisy_aggregation.privacy_spent(
            config.noise_multiplier,
            result.rounds,
            DELTA,
            sampling_rate=1.0 - config.client_dropout,
        )
        summary["privacy"] = {"epsilon": float(spent.epsilon), "delta": DELTA}
    run.write_summary(summary)
    run.remove_checkpoint()
    return summary
