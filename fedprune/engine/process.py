"""Learning processes assembled from TFF's four learning-process slots.

``build_learning_process`` = broadcast distributor + :func:`build_local_training` client work
(plain, masked, proximal and/or measuring) + :func:`build_weighted_aggregator` + SGD(1.0)
finalizer,
composed by
``tff.learning.templates.compose_learning_process``. One round of its ``next`` is a single TFF
computation: broadcast, local training on each client's ``tf.data.Dataset``, data-size-weighted
``federated_mean`` and server update (CA-AFP Eq. 2; within a cluster, Eq. 6; numpy reference
:func:`weighted_cluster_average`). Rounds over a subset of clients (a cluster) are the same
computation called with that subset's datasets and that cluster's state. The model comes as a
spec (:mod:`fedprune.models.spec`); the engine never imports a concrete model.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from fedprune.engine import step_noise
from fedprune.engine.client_work import LocalTraining, build_local_training
from fedprune.models.spec import AutoencoderSpec, ModelSpec


def build_weighted_aggregator(weights_type: tff.Type) -> tff.templates.AggregationProcess:
    """Eq. 2 / Eq. 6's aggregation of ``weights_type``'s trainable part: the mean of the
    client updates weighted by their update weights (examples processed, E x |D_k|, so
    proportional to |D_k|).

    With the SGD(1.0) finalizer of :func:`build_learning_process` and updates ``w - w_k``,
    the new model is sum_k |D_k| / |D_c| w_k: :func:`weighted_cluster_average` in numpy.
    """
    return tff.aggregators.MeanFactory().create(weights_type.trainable, tff.TensorType(np.float32))


def weighted_cluster_average(
    client_models: Sequence[Sequence[np.ndarray]], sizes: Sequence[int]
) -> list[np.ndarray]:
    """Eq. 6 (Eq. 2 for one cluster of all clients), numpy reference:
    w_c = sum_{k in C_c} |D_k| / |D_c| w_c,k, per tensor, computed in float64."""
    n = np.asarray(sizes, np.float64)
    if len(client_models) != len(n) or len(n) == 0 or np.any(n <= 0):
        raise ValueError(f"need one positive size per client model, got {list(sizes)}")
    return [
        sum(nk * np.asarray(m[i], np.float64) for nk, m in zip(n, client_models)) / n.sum()
        for i in range(len(client_models[0]))
    ]


def build_learning_process(
    spec: ModelSpec | AutoencoderSpec, training: LocalTraining
) -> tff.learning.templates.LearningProcess:
    """One round = broadcast, ``training`` on each client, weighted mean, server update.

    The TF graphs are traced here, and their graph-level random seed (which, with the
    layers' own seeds, fixes the dropout streams) comes from TF's global seed at trace time;
    it is set from ``spec.seed`` so that a process is the same whatever ran before it.
    """
    tf.keras.utils.set_random_seed(spec.seed)
    model_fn = step_noise.variable_model_fn(spec)
    initial = spec.initial_weights()
    with tf.Graph().as_default():
        weights_type = tff.learning.models.weights_type_from_model(model_fn())

    @tff.tensorflow.computation
    def initial_model_weights_fn():
        return tff.learning.models.ModelWeights(
            trainable=[tf.constant(w) for w in initial.trainable],
            non_trainable=[tf.constant(w) for w in initial.non_trainable],
        )

    client_work = build_local_training(model_fn, training)
    aggregator = build_weighted_aggregator(weights_type)
    finalizer = tff.learning.templates.build_apply_optimizer_finalizer(
        tff.learning.optimizers.build_sgdm(learning_rate=1.0), weights_type
    )
    distributor = tff.learning.templates.build_broadcast_process(weights_type)
    return tff.learning.templates.compose_learning_process(
        initial_model_weights_fn, distributor, client_work, aggregator, finalizer
    )


def build_fedavg_process(
    spec: ModelSpec, local_epochs: int = 3, learning_rate: float = 1e-3
) -> tff.learning.templates.LearningProcess:
    """FedAvg (Eq. 2) with Adam(``learning_rate``) on the clients."""
    return build_learning_process(spec, LocalTraining(local_epochs, learning_rate))


def with_client_work_state(
    state: tff.learning.templates.LearningAlgorithmState, **fields: list[np.ndarray]
) -> tff.learning.templates.LearningAlgorithmState:
    """``state`` with entries of the client-work state (``mask``, ``anchor``) replaced."""
    client_work = dict(state.client_work)
    unknown = set(fields) - set(client_work)
    if unknown:
        raise KeyError(f"client work state has no {sorted(unknown)}; it has {sorted(client_work)}")
    client_work.update({k: [np.asarray(a, np.float32) for a in v] for k, v in fields.items()})
    return state._replace(client_work=type(state.client_work)(client_work))
