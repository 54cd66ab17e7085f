"""Dropout (and every other Keras layer's randomness) drawn from the training step's seed.

A client's local epochs run as one ``tf.while_loop`` (:mod:`fedprune.engine.local_loop`).
Keras' default random ops are *stateful* kernels: inside a loop their state lives as long as
the TFF worker's cached graph, so a client's dropout masks would continue the stream of the
client the worker trained before it, and a client's model would depend on the order, the
concurrency and the restarts of the worker (a resumed run would train differently).

So inside the client computations every random Keras layer (``Dropout``, ``GaussianNoise``,
random augmentation layers: any layer with a Keras ``RandomGenerator``) draws from a
*stateless* seed, ``fold_in(step seed, layer index)``, where the step seed is
``fold_in((client shuffle seed, epoch), batch)``: each client's noise is a function of
``(run seed, round, client, epoch, batch, layer)`` only.

Interpretation: the papers give dropout rates, not random streams; any stream independent of
the other clients is the paper's training. Used outside a step (a Keras ``fit`` on the model
this module prepared), a random layer raises instead of silently repeating one mask.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import tensorflow as tf
from keras.src import backend as keras_backend

if TYPE_CHECKING:
    import tensorflow_federated as tff

    from fedprune.models.spec import AutoencoderSpec, ModelSpec

_scope = threading.local()


@contextlib.contextmanager
def seeded(step_seed: tf.Tensor) -> Iterator[None]:
    """Random layers traced inside this block draw from ``step_seed`` (int64 [2])."""
    previous = getattr(_scope, "seed", None)
    _scope.seed = step_seed
    try:
        yield
    finally:
        _scope.seed = previous


class StepSeededGenerator(keras_backend.RandomGenerator):
    """A Keras ``RandomGenerator`` whose stateless seed is the current step's seed folded
    with the layer's index in its model."""

    def __init__(self, layer_index: int):
        super().__init__(seed=0, rng_type=self.RNG_STATELESS)
        self.layer_index = layer_index

    def make_seed_for_stateless_op(self) -> tf.Tensor:
        seed = getattr(_scope, "seed", None)
        if seed is None:
            raise RuntimeError(
                "a random layer of a client-computation model ran outside a training step "
                "(fedprune.engine.step_noise.seeded)"
            )
        return tf.random.experimental.stateless_fold_in(seed, self.layer_index)


def seed_random_layers(model: tf.keras.Model) -> tf.keras.Model:
    """``model`` with every random layer drawing from the step's seed (module docstring)."""
    layers = model._flatten_layers(include_self=False, recursive=True)  # noqa: SLF001
    for index, layer in enumerate(layers):
        if isinstance(getattr(layer, "_random_generator", None), keras_backend.RandomGenerator):
            layer._random_generator = StepSeededGenerator(index)  # noqa: SLF001
    return model


def variable_model_fn(
    spec: ModelSpec | AutoencoderSpec,
) -> Callable[[], tff.learning.models.VariableModel]:
    """A no-argument function building ``spec``'s TFF model (fresh variables on each call)
    for the client computations, its random layers drawing from the local step's seed
    (:func:`seed_random_layers`)."""
    import tensorflow_federated as tff

    def model_fn() -> tff.learning.models.VariableModel:
        return tff.learning.models.from_keras_model(
            seed_random_layers(spec.keras()), loss=spec.loss(), input_spec=spec.input_spec()
        )

    return model_fn


def step_seed(shuffle_seed: tf.Tensor, epoch: tf.Tensor, batch: tf.Tensor) -> tf.Tensor:
    """The seed of one local step: ``fold_in((shuffle_seed, epoch), batch)``."""
    base = tf.stack([tf.cast(shuffle_seed, tf.int64), tf.cast(epoch, tf.int64)])
    return tf.random.experimental.stateless_fold_in(base, tf.cast(batch, tf.int64))
