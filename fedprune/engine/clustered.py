"""Every cluster's round as one TFF computation (CA-AFP Phases 2-3, Eq. 5-7).

:func:`build_clustered_round` returns a federated computation

    (<weights, masks, anchor>@SERVER, cluster@CLIENTS, data@CLIENTS)
      -> <weights@SERVER, train metrics per cluster@SERVER[, statistics per cluster@SERVER]>

The server holds the K cluster models and masks stacked along a leading cluster axis. Every
client receives the stack (a simulation shortcut: on a device only its own cluster's model and
mask are sent, and that is what the communication accounts count) and picks its cluster's
entry by its index; it then runs exactly the client work of :mod:`fedprune.engine.client_work`
(masked, proximal towards the anchor, measuring). The server aggregates per cluster with
federated sums of one-hot-scattered values:

* Eq. 6: w_c <- w_c - sum_k n_k u_k / sum_k n_k over the cluster's clients (u_k = w_c - w_k,
  n_k the examples processed), i.e. the data-size-weighted mean of the client models, as
  TFF's weighted ``MeanFactory`` and the SGD(1.0) finalizer do in one cluster's process;
  a cluster without clients this round keeps its model;
* the score statistics (Eq. 9-11) as unweighted means over the cluster's clients.

Scattering adds exact zeros for the other clusters, so each cluster's sums see the same
non-zero terms in the same order as a call per cluster; ``tests/engine/test_clustered.py``
compares the two.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from fedprune.data.partition import ClientData
from fedprune.engine import local_loop
from fedprune.engine.client_work import LocalTraining, seeded_client_update
from fedprune.engine.datasets import round_seed
from fedprune.engine.rounds import call_interruptibly, check_finite
from fedprune.models.spec import ModelSpec


def _stacked(tensor_type: tff.TensorType, clusters: int) -> tff.TensorType:
    return tff.TensorType(tensor_type.dtype, [clusters, *tensor_type.shape])


def build_clustered_round(
    spec: ModelSpec, training: LocalTraining, clusters: int
) -> tff.Computation:
    """One round of all ``clusters`` clusters; see the module docstring. Traced with
    ``spec.seed`` as TF's global seed
    (:func:`~fedprune.engine.client_work.seeded_client_update`)."""
    weights_type, data_type, client_update = seeded_client_update(spec, training)
    tensors = list(weights_type.trainable)
    stacked = [_stacked(t, clusters) for t in tensors]
    server = collections.OrderedDict(weights=stacked)
    if training.masked:
        server["masks"] = stacked
    if training.prox > 0:
        server["anchor"] = tensors
    server_type = tff.StructType(list(server.items()))

    @tff.tensorflow.computation(server_type, np.int32)
    def pick(state, cluster):  # noqa: ANN001 (traced by TFF)
        trainable = [tf.gather(w, cluster) for w in state.weights]
        weights = tff.learning.models.ModelWeights(trainable=trainable, non_trainable=[])
        broadcast = collections.OrderedDict()
        if training.masked:
            broadcast["mask"] = [tf.gather(m, cluster) for m in state.masks]
        if training.prox > 0:
            broadcast["anchor"] = list(state.anchor)
        return weights, broadcast

    update_type = tff.StructType([(None, t) for t in tensors])

    @tff.tensorflow.computation(update_type, np.float32, np.int32)
    def scatter_update(update, weight, cluster):  # noqa: ANN001 (traced by TFF)
        onehot = tf.one_hot(cluster, clusters, dtype=tf.float32)
        weighted = [
            tf.reshape(onehot, [clusters] + [1] * len(u.shape)) * (u * weight)[tf.newaxis]
            for u in update
        ]
        return weighted, onehot * weight

    metrics_type = collections.OrderedDict(examples=np.int32, loss_sum=np.float32, correct=np.int32)

    @tff.tensorflow.computation(metrics_type, np.int32)
    def scatter_metrics(metrics, cluster):  # noqa: ANN001 (traced by TFF)
        onehot = tf.one_hot(cluster, clusters, dtype=tf.int32)
        return collections.OrderedDict(
            examples=onehot * metrics["examples"],
            loss_sum=tf.cast(onehot, tf.float32) * metrics["loss_sum"],
            correct=onehot * metrics["correct"],
        )

    @tff.tensorflow.computation(
        tff.StructType([(None, t) for t in stacked]),
        tff.StructType([(None, t) for t in stacked]),
        tff.TensorType(np.float32, [clusters]),
    )
    def apply_means(weights, weighted_sums, weight_sums):  # noqa: ANN001 (traced by TFF)
        new = []
        for w, s in zip(weights, weighted_sums):
            shape = [clusters] + [1] * (len(w.shape) - 1)
            total = tf.reshape(weight_sums, shape)
            mean = tf.math.divide_no_nan(s, total)
            new.append(tf.where(total > 0, w - mean, w))
        return new

    measuring = training.statistics

    if measuring:
        stats_type = collections.OrderedDict(
            (k, tff.StructType([(None, t) for t in tensors]))
            for k in ("w", "w2", "grad_sign", "grad")
        )

        @tff.tensorflow.computation(stats_type, np.int32)
        def scatter_statistics(stats, cluster):  # noqa: ANN001 (traced by TFF)
            onehot = tf.one_hot(cluster, clusters, dtype=tf.float32)
            return collections.OrderedDict(
                (
                    k,
                    [
                        tf.reshape(onehot, [clusters] + [1] * len(v.shape)) * v[tf.newaxis]
                        for v in values
                    ],
                )
                for k, values in stats.items()
            ), onehot

        @tff.tensorflow.computation(
            collections.OrderedDict(
                (k, tff.StructType([(None, t) for t in stacked]))
                for k in ("w", "w2", "grad_sign", "grad")
            ),
            tff.TensorType(np.float32, [clusters]),
        )
        def statistics_means(sums, counts):  # noqa: ANN001 (traced by TFF)
            return collections.OrderedDict(
                (
                    k,
                    [
                        tf.math.divide_no_nan(
                            v, tf.reshape(counts, [clusters] + [1] * (len(v.shape) - 1))
                        )
                        for v in values
                    ],
                )
                for k, values in sums.items()
            )

    @tff.federated_computation(
        tff.FederatedType(server_type, tff.SERVER),
        tff.FederatedType(np.int32, tff.CLIENTS),
        tff.FederatedType(data_type, tff.CLIENTS),
    )
    def clustered_round(state, cluster, data):  # noqa: ANN001 (traced by TFF)
        weights, broadcast = tff.federated_map(pick, (tff.federated_broadcast(state), cluster))
        client_result, result = tff.federated_map(client_update, (weights, broadcast, data))
        weighted, weight = tff.federated_map(
            scatter_update, (client_result.update, client_result.update_weight, cluster)
        )
        new_weights = tff.federated_map(
            apply_means,
            (state.weights, tff.federated_sum(weighted), tff.federated_sum(weight)),
        )
        metrics = tff.federated_sum(tff.federated_map(scatter_metrics, (result.metrics, cluster)))
        out = collections.OrderedDict(weights=new_weights, train=metrics)
        if measuring:
            sums, counts = tff.federated_map(scatter_statistics, (result.statistics, cluster))
            out["statistics"] = tff.federated_map(
                statistics_means, (tff.federated_sum(sums), tff.federated_sum(counts))
            )
        return tff.federated_zip(out)

    return clustered_round


@dataclasses.dataclass
class ClusterOutput:
    """One cluster's result of a clustered round: its new model, its clients' training
    metrics (as TFF's ``train`` metrics: mean loss, accuracy, examples) and, in a measuring
    round, the federated means of the score statistics."""

    weights: list[np.ndarray]
    train: dict[str, float]
    statistics: dict[str, list[np.ndarray]] | None = None


def run_clustered_round(
    computation: tff.Computation,
    weights: Mapping[int, Sequence[np.ndarray]],
    masks: Mapping[int, Sequence[np.ndarray]] | None,
    anchor: Sequence[np.ndarray] | None,
    members: Mapping[int, Sequence[ClientData]],
    round_num: int,
    seed: int,
    batch_size: int,
) -> dict[int, ClusterOutput]:
    """One call of ``computation`` (:func:`build_clustered_round`) for the clusters in
    ``members`` (cluster -> its sampled clients); clusters 0..K-1 of ``weights`` / ``masks``
    are all sent, those without clients keep their model. Each client's data is shuffled by
    ``(seed, round, client)``, as in :func:`fedprune.engine.rounds.run_round`;
    :class:`~fedprune.engine.rounds.TrainingDiverged` if a trained cluster's loss or model
    is not finite."""
    k = len(weights)
    state = collections.OrderedDict(weights=stack_clusters([weights[c] for c in range(k)]))
    if masks is not None:
        state["masks"] = stack_clusters([masks[c] for c in range(k)])
    if anchor is not None:
        state["anchor"] = [np.asarray(a, np.float32) for a in anchor]
    order = [(c, client) for c, clients in members.items() for client in clients]
    data = [
        local_loop.client_tensors(client, batch_size, round_seed(seed, round_num, client.client_id))
        for _, client in order
    ]
    clusters = [np.int32(c) for c, _ in order]
    result = call_interruptibly(lambda: computation(state, clusters, data))
    train = result["train"]
    outputs = {}
    for c, clients in members.items():
        examples = np.float32(max(int(train["examples"][c]), 1))
        metrics = {
            "train_loss": float(np.float32(train["loss_sum"][c]) / examples),
            "train_accuracy": float(np.float32(train["correct"][c]) / examples),
            "train_examples": int(train["examples"][c]),
        }
        new = unstack_cluster(result["weights"], c)
        check_finite(round_num, [x.client_id for x in clients], metrics["train_loss"], new)
        stats = None
        if "statistics" in result:
            stats = {
                key: [np.asarray(v)[c] for v in values]
                for key, values in result["statistics"].items()
            }
        outputs[c] = ClusterOutput(new, metrics, stats)
    return outputs


def stack_clusters(per_cluster: Sequence[Sequence[np.ndarray]]) -> list[np.ndarray]:
    """K lists of tensors -> one list of (K, ...) float32 stacks."""
    return [
        np.stack([np.asarray(c[i], np.float32) for c in per_cluster])
        for i in range(len(per_cluster[0]))
    ]


def unstack_cluster(stacked: Sequence[np.ndarray], cluster: int) -> list[np.ndarray]:
    """Cluster ``cluster``'s tensors of :func:`stack_clusters`'s stacks."""
    return [np.asarray(s[cluster]) for s in stacked]
