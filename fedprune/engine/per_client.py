"""Rounds that give the server every client's update: clustered FL that re-clusters from the
updates themselves (AS-CFL, CFL) or lets each client pick its model (IFCA).

:func:`build_update_round` returns a federated computation

    (<models>@SERVER, learning rate@SERVER, model index@CLIENTS, data@CLIENTS)
      -> <update@CLIENTS, metrics@CLIENTS>

The server holds M models stacked along a leading axis (M = 1 for FedAvg). Every client
receives the stack (a simulation shortcut, as in :mod:`fedprune.engine.clustered`: on a
device only its own model is sent, and that is what the communication accounts count),
picks its entry by index and runs E epochs of plain mini-batch SGD at the round's learning
rate (AS-CFL: "learning rate 0.1 · 0.99^t"), and returns its update Δw = w_trained −
w_start with its metrics (examples, summed loss, correct predictions). The server-side
algorithm (similarity, clustering, aggregation) works on the per-client updates in numpy:
every one of those methods needs the individual updates, which a federated sum would hide.

:func:`build_loss_round` returns

    (<models>@SERVER, data@CLIENTS) -> mean training loss of each model@CLIENTS

which IFCA's clients use to pick the model with the lowest loss.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from fedprune.data.partition import ClientData
from fedprune.engine import local_loop, step_noise
from fedprune.engine.datasets import round_seed
from fedprune.engine.rounds import call_interruptibly
from fedprune.models.spec import ModelSpec

LOSS_CHUNK = 1024  # examples per forward pass of IFCA's loss evaluation (dropout off)


def _types(spec: ModelSpec, models: int) -> tuple[list, tff.Type, tff.Type]:
    model_fn = step_noise.variable_model_fn(spec)
    with tf.Graph().as_default():
        probe = model_fn()
        weights_type = tff.learning.models.weights_type_from_model(probe)
        data_type = local_loop.data_type(probe.input_spec)
    if len(weights_type.non_trainable):
        raise ValueError(f"model {spec.model!r} has non-trainable weights; not supported here")
    tensors = list(weights_type.trainable)
    stacked = tff.StructType([(None, tff.TensorType(t.dtype, [models, *t.shape])) for t in tensors])
    return tensors, stacked, data_type


def build_update_round(spec: ModelSpec, epochs: int, models: int) -> tff.Computation:
    """One round of local SGD from each client's chosen model; see the module docstring.
    Traced with ``spec.seed`` as TF's global seed (dropout streams, as the other rounds)."""
    if epochs < 1 or models < 1:
        raise ValueError(f"epochs and models must be >= 1, got {epochs} and {models}")
    tf.keras.utils.set_random_seed(spec.seed)
    model_fn = step_noise.variable_model_fn(spec)
    tensors, stacked, data_type = _types(spec, models)

    @tff.tensorflow.computation(stacked, np.float32, np.int32, data_type)
    def client_update(models_stack, learning_rate, index, data):  # noqa: ANN001
        model = model_fn()
        trainable = tuple(model.trainable_variables)

        def step(state, batch):  # noqa: ANN001 (traced by TF)
            examples, loss_sum, correct = state
            with tf.GradientTape() as tape:
                out = model.forward_pass(batch, training=True)
            grads = tape.gradient(out.loss, trainable)
            for var, grad in zip(trainable, grads):
                var.assign_sub(learning_rate * grad)
            n = tf.shape(batch[1])[0]
            pred = tf.argmax(out.predictions, axis=-1, output_type=tf.int64)
            correct += tf.reduce_sum(tf.cast(tf.equal(pred, batch[1]), tf.int32))
            return examples + n, loss_sum + out.loss * tf.cast(n, tf.float32), correct

        @tf.function
        def train(start, dataset):  # noqa: ANN001 (traced by TF)
            for var, value in zip(trainable, start):
                var.assign(value)
            init = (tf.constant(0), tf.constant(0.0), tf.constant(0))
            examples, loss_sum, correct = local_loop.run_epochs(
                local_loop.unpack(dataset), epochs, step, init
            )
            update = [v - s for v, s in zip(trainable, start)]
            return update, collections.OrderedDict(
                examples=examples, loss_sum=loss_sum, correct=correct
            )

        start = [tf.gather(w, index) for w in models_stack]
        return train(start, data)

    @tff.federated_computation(
        tff.FederatedType(stacked, tff.SERVER),
        tff.FederatedType(np.float32, tff.SERVER),
        tff.FederatedType(np.int32, tff.CLIENTS),
        tff.FederatedType(data_type, tff.CLIENTS),
    )
    def update_round(models_stack, learning_rate, index, data):  # noqa: ANN001
        return tff.federated_map(
            client_update,
            (
                tff.federated_broadcast(models_stack),
                tff.federated_broadcast(learning_rate),
                index,
                data,
            ),
        )

    return update_round


def build_loss_round(spec: ModelSpec, models: int) -> tff.Computation:
    """Each client's mean training loss under each of the ``models`` (IFCA's choice)."""
    model_fn = step_noise.variable_model_fn(spec)
    tensors, stacked, data_type = _types(spec, models)

    @tff.tensorflow.computation(stacked, data_type)
    def client_losses(models_stack, data):  # noqa: ANN001 (traced by TFF)
        model = model_fn()
        trainable = tuple(model.trainable_variables)

        def add(state, batch):  # noqa: ANN001 (traced by TF)
            total, count = state
            result = model.forward_pass(batch, training=False)
            n = tf.cast(tf.shape(batch[1])[0], tf.float32)
            return total + result.loss * n, count + n

        @tf.function
        def losses(models_stack, dataset):  # noqa: ANN001 (traced by TF)
            data = local_loop.unpack(dataset)
            out = []
            for m in range(models):
                for var, w in zip(trainable, models_stack):
                    var.assign(w[m])
                init = (tf.constant(0.0), tf.constant(0.0))
                total, count = local_loop.run_chunks(data, LOSS_CHUNK, add, init)
                out.append(total / tf.maximum(count, 1.0))
            return tf.stack(out)

        return losses(models_stack, data)

    @tff.federated_computation(
        tff.FederatedType(stacked, tff.SERVER), tff.FederatedType(data_type, tff.CLIENTS)
    )
    def loss_round(models_stack, data):  # noqa: ANN001 (traced by TFF)
        return tff.federated_map(client_losses, (tff.federated_broadcast(models_stack), data))

    return loss_round


@dataclasses.dataclass
class ClientUpdates:
    """What :func:`run_update_round` returns: per client (in the order given) its update
    (one array per trainable tensor), examples trained on, mean loss and accuracy."""

    client_ids: list[int]
    updates: list[list[np.ndarray]]
    examples: np.ndarray
    loss: np.ndarray
    accuracy: np.ndarray


def run_update_round(
    computation: tff.Computation,
    models: Sequence[Sequence[np.ndarray]],
    learning_rate: float,
    model_of: dict[int, int],
    clients: Sequence[ClientData],
    round_num: int,
    seed: int,
    batch_size: int,
    epochs: Sequence[int] | None = None,
) -> ClientUpdates:
    """Call ``computation`` (:func:`build_update_round`) on these clients; ``model_of[id]``
    is the index of the model each client starts from. Shuffling as every round does
    (``round_seed``), so a resumed run trains exactly the same. ``epochs`` (one per client):
    each client's data is repeated that many times (reshuffled each time) before the
    computation's own ``epochs``; build it with ``epochs=1`` for per-client epochs."""
    stack = [np.stack(ws) for ws in zip(*models)]
    if epochs is not None and (len(epochs) != len(clients) or min(epochs, default=1) < 1):
        raise ValueError(f"epochs must be one integer >= 1 per client, got {list(epochs)}")
    repeats = [1] * len(clients) if epochs is None else [int(e) for e in epochs]
    data = [
        local_loop.client_tensors(c, batch_size, round_seed(seed, round_num, c.client_id), r)
        for c, r in zip(clients, repeats)
    ]
    index = [np.int32(model_of[c.client_id]) for c in clients]
    results = call_interruptibly(  # one (update, metrics) per client
        lambda: computation(stack, np.float32(learning_rate), index, data)
    )
    updates, metrics = [r[0] for r in results], [r[1] for r in results]
    examples = np.array([m["examples"] for m in metrics], dtype=np.int64)
    safe = np.maximum(examples, 1)
    return ClientUpdates(
        client_ids=[c.client_id for c in clients],
        updates=[[np.asarray(u) for u in update] for update in updates],
        examples=examples,
        loss=np.array([m["loss_sum"] for m in metrics], dtype=np.float64) / safe,
        accuracy=np.array([m["correct"] for m in metrics], dtype=np.float64) / safe,
    )


def run_loss_round(
    computation: tff.Computation,
    models: Sequence[Sequence[np.ndarray]],
    clients: Sequence[ClientData],
) -> np.ndarray:
    """``[clients, models]`` mean training losses (:func:`build_loss_round`), over each
    client's whole training set in chunks of :data:`LOSS_CHUNK` (no batch size or shuffle
    enters a mean loss with dropout off)."""
    stack = [np.stack(ws) for ws in zip(*models)]
    data = [local_loop.client_tensors(c, LOSS_CHUNK, 0) for c in clients]
    losses = call_interruptibly(lambda: computation(stack, data))
    return np.stack([np.asarray(x, dtype=np.float64) for x in losses])
