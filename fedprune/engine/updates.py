"""Per-client model updates delivered to the server: the clustering step of CA-AFP (Eq. 3).

Clustering needs each client's own update direction, so unlike a training round this
computation returns a value placed at the clients (one flattened update per client).
"""

from __future__ import annotations

import collections
from collections.abc import Sequence

import numpy as np
import tensorflow_federated as tff

from fedprune.data.partition import ClientData
from fedprune.engine import local_loop
from fedprune.engine.client_work import LocalTraining, seeded_client_update
from fedprune.engine.datasets import round_seed
from fedprune.engine.rounds import TrainingDiverged
from fedprune.models.spec import ModelSpec


def build_update_computation(spec: ModelSpec, training: LocalTraining) -> tff.Computation:
    """(weights@SERVER, data@CLIENTS) -> Δw_k@CLIENTS with Δw_k = w_k - w (Eq. 3)."""
    if training.masked or training.prox > 0:
        raise ValueError("the clustering step trains plainly (no mask, no proximal term)")
    weights_type, data_type, client_update = seeded_client_update(spec, training)

    @tff.tensorflow.computation(client_update.type_signature.result[0].update)
    def negate(update):  # noqa: ANN001 (traced by TFF)
        return [-u for u in update]

    @tff.federated_computation(
        tff.FederatedType(weights_type, tff.SERVER), tff.FederatedType(data_type, tff.CLIENTS)
    )
    def updates(weights, data):  # noqa: ANN001 (traced by TFF)
        nothing = tff.federated_value(collections.OrderedDict(), tff.CLIENTS)
        result, _ = tff.federated_map(
            client_update, (tff.federated_broadcast(weights), nothing, data)
        )
        return tff.federated_map(negate, result.update)

    return updates


def client_updates(
    computation: tff.Computation,
    weights: tff.learning.models.ModelWeights,
    clients: Sequence[ClientData],
    seed: int,
    batch_size: int,
    round_num: int = 0,
) -> np.ndarray:
    """(clients, parameters) matrix of flattened updates, rows in ``clients`` order.

    :class:`~fedprune.engine.rounds.TrainingDiverged` naming the clients whose update is not
    finite (their local epoch diverged): nothing is clustered on nan or inf."""
    data = [
        local_loop.client_tensors(c, batch_size, round_seed(seed, round_num, c.client_id))
        for c in clients
    ]
    result = computation(weights, data)
    matrix = np.stack([np.concatenate([np.ravel(u) for u in r]) for r in result])
    diverged = [c.client_id for c, row in zip(clients, matrix) if not np.isfinite(row).all()]
    if diverged:
        raise TrainingDiverged(
            f"round {round_num}: the clustering pass diverged (non-finite update) on clients "
            f"{', '.join(str(i) for i in sorted(diverged))}; nothing was clustered: lower --lr "
            "or check those clients' data, then run the same command to resume"
        )
    return matrix


def one_epoch_updates(
    spec: ModelSpec,
    weights: Sequence[np.ndarray],
    clients: Sequence[ClientData],
    learning_rate: float,
    seed: int,
    batch_size: int,
    round_num: int = 0,
) -> np.ndarray:
    """The clustering signal of CA-AFP's clustering pass (Eq. 3): every client downloads the
    trainable ``weights`` w, trains one local epoch of the pipeline's client optimizer
    (:class:`~fedprune.engine.client_work.LocalTraining`: Adam at ``learning_rate``) in
    batches of ``batch_size`` (shuffled by ``round_seed(seed, round_num, client)``) and
    uploads Δw_k = w_k - w; (clients, parameters) rows in ``clients`` order
    (:func:`fedprune.algorithms.pipeline.phases.clustering_signals`).

    The methods on plain SGD (AS-CFL's baselines) take their signal from their own round
    computation instead (:func:`fedprune.algorithms.ascfl.auto_clusters.pass_signals`):
    Adam at their SGD learning rate (0.1) would be another update altogether."""
    training = LocalTraining(1, learning_rate, statistics=False)
    return client_updates(
        build_update_computation(spec, training),
        tff.learning.models.ModelWeights(list(weights), []),
        clients,
        seed,
        batch_size,
        round_num=round_num,
    )
