"""Local training as a TFF client-work process, optionally masked, proximal and measuring.

Type signature of ``next`` (checked by TFF's ``ClientWorkProcess``)::

    (<state@SERVER, ModelWeights@CLIENTS, client tensors@CLIENTS>
     -> <state@SERVER, ClientResult(update, update_weight)@CLIENTS, metrics@SERVER>)

``state`` is what the server broadcasts with the model: the binary ``mask`` (one per trainable
tensor; ones for tensors that are never pruned) when ``masked``, and the proximal ``anchor``
w_p,k when ``prox > 0``. It is a named part of the learning process's state
(``state.client_work``), replaced by the algorithm between rounds.

Each client runs ``epochs`` epochs of a TFF optimizer, as one in-graph loop over its data held
as tensors (:mod:`fedprune.engine.local_loop`: a fresh shuffle every epoch, batches gathered
inside the loop), on

    L_k(w) = CE_k(w) + prox / 2 * ||w - anchor||²            (CA-AFP Eq. 5; Eq. 1 if prox = 0)

(:func:`fedprune.engine.objectives.proximal_objective`, per batch)

updating only the unmasked weights: gradients are multiplied by the mask and the weights are
re-masked after every step, so a client's model satisfies w = w ⊙ M throughout (Eq. 7/12).
Its update is ``initial - trained`` trainable weights, so that the finalizer's SGD with rate 1
turns the data-size-weighted mean of updates into the weighted mean of the client models
(Eq. 2/6); masked entries are exactly 0 in every client model and stay exactly 0 on the server.
The update weight is the number of examples processed (E x |D_k|, proportional to |D_k|).
The client optimizer starts from a fresh state every round (as in TFF's FedAvg): clients keep
no state between rounds, which is what a client sampled once every few rounds can offer.

With ``statistics=True`` each client also measures, for the importance scores of Eq. 9-11:
the gradient of its local objective at the received model w_c ⊙ M_c (Algorithm 1 line 39:
"clients compute gradients using w_c ⊙ M_c", so before training), and its trained weights.
Only unweighted federated means leave the aggregation: E_k[w], E_k[w²], E_k[sign(g)] and
E_k[g], so no client's model or gradient is visible to the server.

Interpretation: the gradient is that of Eq. 5 over the client's whole training
set, the mean cross entropy over all its examples plus the proximal term, **with dropout
off**, computed in batches of ``STATISTICS_BATCH`` examples (for our clients, one or two).
The alternative, the mean of the per-batch gradients at batch 32 with dropout on, costs
as many optimizer-free steps as a local epoch (1.40-1.57x a FedAvg round in
``make bench``). The paper does not say which; dropout's random units make the stochastic
version a noisier estimate of the same gradient, and only this statistic needs the
pre-training model (E_k[w], E_k[w²] come from the trained weights at no cost).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from fedprune.engine import local_loop, step_noise
from fedprune.engine.objectives import local_loss, proximal_objective, proximal_term

if TYPE_CHECKING:
    from fedprune.models.spec import ModelSpec

STATISTICS_BATCH = 1024


@dataclasses.dataclass(frozen=True)
class LocalTraining:
    """What a client does in a round.

    Attributes
    ----------
    epochs : local epochs E.
    learning_rate : client Adam learning rate.
    prox : lambda of Eq. 5 (0 disables the proximal term and the anchor).
    masked : train under a broadcast mask.
    statistics : also return the score statistics (federated means; see module docstring).
    """

    epochs: int
    learning_rate: float = 1e-3
    prox: float = 0.0
    masked: bool = False
    statistics: bool = False

    def __post_init__(self) -> None:
        if self.epochs < 1:
            raise ValueError(f"local epochs must be >= 1, got {self.epochs}")
        if self.prox < 0:
            raise ValueError(f"prox (lambda) must be >= 0, got {self.prox}")


def state_type(config: LocalTraining, weights_type: tff.Type) -> tff.Type:
    """The (unplaced) type of the client-work state for ``config``."""
    fields = collections.OrderedDict()
    if config.masked:
        fields["mask"] = weights_type.trainable
    if config.prox > 0:
        fields["anchor"] = weights_type.trainable
    return tff.types.to_type(fields)


def build_client_update(
    model_fn: Callable[[], tff.learning.models.VariableModel],
    config: LocalTraining,
    weights_type: tff.Type,
    data_type: tff.Type,
) -> tff.Computation:
    """The TF computation one client runs: (weights, broadcast state, data) -> results."""
    optimizer = tff.learning.optimizers.build_adam(config.learning_rate)
    broadcast_type = state_type(config, weights_type)

    @tff.tensorflow.computation(weights_type, broadcast_type, data_type)
    def client_update(initial_weights, broadcast, data):  # noqa: ANN001 (traced by TFF)
        model = model_fn()
        weights = tff.learning.models.ModelWeights.from_model(model)
        trainable = tuple(weights.trainable)
        mask = tuple(broadcast["mask"]) if config.masked else None
        anchor = tuple(broadcast["anchor"]) if config.prox > 0 else None
        opt_state = optimizer.initialize(tuple(tf.TensorSpec(v.shape, v.dtype) for v in trainable))

        def objective(batch):  # noqa: ANN001 (traced by TF)
            return proximal_objective(model, batch, trainable, anchor, config.prox)

        def step(state, batch):  # noqa: ANN001 (traced by TF)
            opt_state, examples, loss_sum, correct = state
            with tf.GradientTape() as tape:
                out, loss = objective(batch)
            grads = tape.gradient(loss, trainable)
            if mask is not None:
                grads = tuple(g * m for g, m in zip(grads, mask))
            opt_state, new = optimizer.next(opt_state, trainable, grads)
            if mask is not None:
                new = tuple(w * m for w, m in zip(new, mask))
            for var, value in zip(trainable, new):
                var.assign(value)
            n = tf.shape(batch[1])[0]
            if batch[1].dtype.is_integer:  # a classifier; reconstruction targets have no accuracy
                pred = tf.argmax(out.predictions, axis=-1, output_type=tf.int64)
                correct += tf.reduce_sum(tf.cast(tf.equal(pred, batch[1]), tf.int32))
            return opt_state, examples + n, loss_sum + out.loss * tf.cast(n, tf.float32), correct

        def accumulate_gradient(state, batch):  # noqa: ANN001 (traced by TF)
            # the summed cross entropy of a large batch, dropout off (module docstring)
            total, examples = state
            n = tf.cast(tf.shape(batch[1])[0], tf.float32)
            with tf.GradientTape() as tape:
                _, loss = local_loss(model, batch, training=False)
                loss_sum = loss * n
            grads = tape.gradient(loss_sum, trainable)
            return tuple(t + g for t, g in zip(total, grads)), examples + n

        def objective_gradient(data):  # noqa: ANN001 (traced by TF)
            """Eq. 5's gradient at the current weights over the whole local dataset."""
            zeros = tuple(tf.zeros_like(v) for v in trainable)
            init = (zeros, tf.constant(0.0))
            total, examples = local_loop.run_chunks(
                data, STATISTICS_BATCH, accumulate_gradient, init
            )
            gradient = [t / tf.maximum(examples, 1.0) for t in total]
            if anchor is not None:
                with tf.GradientTape() as tape:
                    term = proximal_term(trainable, anchor, config.prox)
                gradient = [g + p for g, p in zip(gradient, tape.gradient(term, trainable))]
            return gradient

        # A tf.function orders the assignments, the loops and the final reads. Its loops are
        # explicit tf.while_loops and every `if`/`for` above is over Python values, so autograph
        # has nothing to convert: off, the round computation traces in less time (the same
        # graph; docs/engine.md "Start-up").
        @tf.function(autograph=False)
        def train(initial_weights, dataset):  # noqa: ANN001 (traced by TF)
            tf.nest.map_structure(lambda v, t: v.assign(t), weights, initial_weights)
            data = local_loop.unpack(dataset)
            result = collections.OrderedDict()
            if config.statistics:
                gradient = objective_gradient(data)
            init = (opt_state, tf.constant(0), tf.constant(0.0), tf.constant(0))
            _, examples, loss_sum, correct = local_loop.run_epochs(data, config.epochs, step, init)
            update = [a - b for a, b in zip(initial_weights.trainable, weights.trainable)]
            result["metrics"] = collections.OrderedDict(
                examples=examples, loss_sum=loss_sum, correct=correct
            )
            if config.statistics:
                trained = [tf.identity(v) for v in weights.trainable]
                result["statistics"] = collections.OrderedDict(
                    w=trained,
                    w2=[tf.square(v) for v in trained],
                    grad_sign=[tf.sign(g) for g in gradient],
                    grad=gradient,
                )
            return update, result

        update, result = train(initial_weights, data)
        client_result = tff.learning.templates.ClientResult(
            update=update,
            update_weight=tf.cast(result["metrics"]["examples"], tf.float32),
        )
        return client_result, result

    return client_update


def seeded_client_update(
    spec: ModelSpec, training: LocalTraining
) -> tuple[tff.Type, tff.Type, tff.Computation]:
    """``spec``'s weights type, its clients' data type and the client computation of
    ``training`` on its model (:func:`build_client_update`), traced with ``spec.seed`` as
    TF's global seed: the graph-level seed of the clients' dropout streams, set as
    :func:`fedprune.engine.process.build_learning_process` sets it, so that the clients'
    dropout streams are the same as there whatever ran before."""
    tf.keras.utils.set_random_seed(spec.seed)
    model_fn = step_noise.variable_model_fn(spec)
    with tf.Graph().as_default():
        probe = model_fn()
        weights_type = tff.learning.models.weights_type_from_model(probe)
        data_type = local_loop.data_type(probe.input_spec)
    return weights_type, data_type, build_client_update(model_fn, training, weights_type, data_type)


def build_local_training(
    model_fn: Callable[[], tff.learning.models.VariableModel],
    config: LocalTraining,
) -> tff.learning.templates.ClientWorkProcess:
    """The client-work process for ``config`` (initial state: all-ones mask, zero anchor)."""
    with tf.Graph().as_default():
        probe = model_fn()
        weights_type = tff.learning.models.weights_type_from_model(probe)
        data_type = local_loop.data_type(probe.input_spec)
        shapes = [v.shape.as_list() for v in probe.trainable_variables]
    client_update = build_client_update(model_fn, config, weights_type, data_type)
    unplaced_state = state_type(config, weights_type)

    @tff.tensorflow.computation
    def initial_state():
        fields = collections.OrderedDict()
        if config.masked:
            fields["mask"] = [tf.ones(s, tf.float32) for s in shapes]
        if config.prox > 0:
            fields["anchor"] = [tf.zeros(s, tf.float32) for s in shapes]
        return fields

    @tff.federated_computation
    def init_fn():
        return tff.federated_eval(initial_state, tff.SERVER)

    @tff.federated_computation(
        tff.FederatedType(unplaced_state, tff.SERVER),
        tff.FederatedType(weights_type, tff.CLIENTS),
        tff.FederatedType(data_type, tff.CLIENTS),
    )
    def next_fn(state, weights, data):  # noqa: ANN001 (traced by TFF)
        broadcast = tff.federated_broadcast(state)
        client_result, result = tff.federated_map(client_update, (weights, broadcast, data))
        measurements = collections.OrderedDict(
            train=tff.federated_map(_train_metrics, tff.federated_sum(result.metrics))
        )
        if config.statistics:
            measurements["statistics"] = tff.federated_mean(result.statistics)
            measurements["clients"] = tff.federated_sum(
                tff.federated_value(np.int32(1), tff.CLIENTS)
            )
        return tff.templates.MeasuredProcessOutput(
            state, client_result, tff.federated_zip(measurements)
        )

    return tff.learning.templates.ClientWorkProcess(init_fn, next_fn)


@tff.tensorflow.computation(
    collections.OrderedDict(examples=np.int32, loss_sum=np.float32, correct=np.int32)
)
def _train_metrics(totals):  # noqa: ANN001 (traced by TFF)
    n = tf.cast(tf.maximum(totals["examples"], 1), tf.float32)
    return collections.OrderedDict(
        train_loss=totals["loss_sum"] / n,
        train_accuracy=tf.cast(totals["correct"], tf.float32) / n,
        train_examples=totals["examples"],
    )
