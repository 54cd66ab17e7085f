"""Local training as a TFF client-work process: E epochs of a TFF optimizer on the client data.

Type signature of ``next`` (checked by TFF's ``ClientWorkProcess``)::

    (<state@SERVER, ModelWeights@CLIENTS, (x, y)*@CLIENTS>
     -> <state@SERVER, ClientResult(update, update_weight)@CLIENTS, metrics@SERVER>)

The update is ``initial - trained`` trainable weights, so that the finalizer's SGD with rate 1
turns the weighted mean of updates into the weighted mean of the trained models (Eq. 2 of the
CA-AFP paper). The update weight is the number of examples the client processed
(E x |D_k|; E is the same for all clients, so the normalized weights are |D_k| / |D|).
The client optimizer starts from a fresh state every round (as in TFF's FedAvg): clients keep
no state between rounds, which is what a client sampled once every few rounds can offer.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff


def build_local_training(
    model_fn: Callable[[], tff.learning.models.VariableModel],
    optimizer: tff.learning.optimizers.Optimizer,
    local_epochs: int,
) -> tff.learning.templates.ClientWorkProcess:
    """A stateless client work running ``local_epochs`` epochs of ``optimizer`` per round."""
    if local_epochs < 1:
        raise ValueError(f"local_epochs must be >= 1, got {local_epochs}")
    with tf.Graph().as_default():
        probe = model_fn()
        weights_type = tff.learning.models.weights_type_from_model(probe)
        data_type = tff.SequenceType(tff.types.tensorflow_to_type(probe.input_spec))

    @tff.tensorflow.computation(weights_type, data_type)
    def client_update(initial_weights, dataset):  # noqa: ANN001 (traced by TFF/TF)
        model = model_fn()
        weights = tff.learning.models.ModelWeights.from_model(model)
        trainable = tuple(weights.trainable)
        opt_state = optimizer.initialize(tuple(tf.TensorSpec(v.shape, v.dtype) for v in trainable))

        def step(state, batch):  # noqa: ANN001 (traced by TFF/TF)
            opt_state, examples, loss_sum, correct = state
            with tf.GradientTape() as tape:
                out = model.forward_pass(batch, training=True)
            grads = tape.gradient(out.loss, trainable)
            opt_state, new = optimizer.next(opt_state, trainable, grads)
            for var, value in zip(trainable, new):
                var.assign(value)
            n = tf.shape(batch[1])[0]
            pred = tf.argmax(out.predictions, axis=-1, output_type=tf.int64)
            return (
                opt_state,
                examples + n,
                loss_sum + out.loss * tf.cast(n, tf.float32),
                correct + tf.reduce_sum(tf.cast(tf.equal(pred, batch[1]), tf.int32)),
            )

        # A tf.function orders the assignments, the training loop and the final reads.
        @tf.function
        def train(initial_weights, dataset):  # noqa: ANN001 (traced by TFF/TF)
            tf.nest.map_structure(lambda v, t: v.assign(t), weights, initial_weights)
            init = (opt_state, tf.constant(0), tf.constant(0.0), tf.constant(0))
            _, examples, loss_sum, correct = dataset.repeat(local_epochs).reduce(init, step)
            update = [a - b for a, b in zip(initial_weights.trainable, weights.trainable)]
            stats = collections.OrderedDict(examples=examples, loss_sum=loss_sum, correct=correct)
            return update, stats

        update, stats = train(initial_weights, dataset)
        return (
            tff.learning.templates.ClientResult(
                update=update, update_weight=tf.cast(stats["examples"], tf.float32)
            ),
            stats,
        )

    @tff.federated_computation
    def init_fn():
        return tff.federated_value((), tff.SERVER)

    @tff.federated_computation(
        init_fn.type_signature.result,
        tff.FederatedType(weights_type, tff.CLIENTS),
        tff.FederatedType(data_type, tff.CLIENTS),
    )
    def next_fn(state, weights, data):  # noqa: ANN001 (traced by TFF/TF)
        result, stats = tff.federated_map(client_update, (weights, data))
        totals = tff.federated_sum(stats)
        metrics = tff.federated_map(_train_metrics, totals)
        return tff.templates.MeasuredProcessOutput(state, result, metrics)

    return tff.learning.templates.ClientWorkProcess(init_fn, next_fn)


@tff.tensorflow.computation(
    collections.OrderedDict(examples=np.int32, loss_sum=np.float32, correct=np.int32)
)
def _train_metrics(totals):  # noqa: ANN001 (traced by TFF/TF)
    n = tf.cast(tf.maximum(totals["examples"], 1), tf.float32)
    return collections.OrderedDict(
        train_loss=totals["loss_sum"] / n,
        train_accuracy=tf.cast(totals["correct"], tf.float32) / n,
        train_examples=totals["examples"],
    )
