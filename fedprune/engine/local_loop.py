"""A client's data as tensors and its local epochs as one in-graph loop over them.

Every method's client work (CA-AFP and its baselines, FedAvg, the clustering step, AS-CFL,
CFL and IFCA, FedCRef's community rounds) receives its client's data as one structure of
tensors, :func:`data_type`::

    <x=float32[n, ...], y=int64[n] (or float32[n, d] for an autoencoder),
     shuffle_seed=int64, batch_size=int32, repeats=int32>*

a TFF sequence of exactly one element (TFF's ``ClientWorkProcess`` takes client data only as
sequences; :func:`unpack` reads that element once per client and round). The work runs its epochs
with :func:`run_epochs`: a ``tf.while_loop`` over epochs and, inside it, over batches. Each
epoch draws a fresh permutation of the n examples from ``(shuffle_seed, epoch)``
(``tf.random.experimental.stateless_shuffle``); every step gathers its batch of
``batch_size`` examples by index, the last batch of an epoch partial, as
``Dataset.shuffle(n, reshuffle_each_iteration=True).batch(batch_size)`` cuts an epoch.

Why: iterating a ``tf.data`` pipeline inside the client's graph (``dataset.reduce``) costs
1.5-1.6x the same steps in a ``tf.while_loop`` over tensors (docs/engine.md, "Speed"). The
data pipeline's work (conversion to tensors) now happens once per client per round, outside
the loop; the loop itself is only the model's steps and one gather per batch.

The shuffle seed comes from ``(run seed, round, client)``
(:func:`fedprune.engine.datasets.round_seed`), so a resumed run trains on exactly the batches
an uninterrupted run would. ``repeats`` multiplies the computation's own epochs for one client
(AS-CFL's per-client epochs); it is 1 otherwise.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from fedprune.data.partition import ClientData
from fedprune.engine import step_noise


def data_type(input_spec: object) -> tff.SequenceType:
    """The TFF type of one client's data for a model whose batched ``input_spec`` is
    ``(x spec, y spec)`` (leading dimension None: the client's number of examples)."""
    x_spec, y_spec = input_spec
    element = collections.OrderedDict(
        x=tff.TensorType(x_spec.dtype.as_numpy_dtype, x_spec.shape),
        y=tff.TensorType(y_spec.dtype.as_numpy_dtype, y_spec.shape),
        shuffle_seed=tff.TensorType(np.int64),
        batch_size=tff.TensorType(np.int32),
        repeats=tff.TensorType(np.int32),
    )
    return tff.SequenceType(tff.to_type(element))


def unpack(data: tf.data.Dataset) -> collections.OrderedDict:
    """The one element of a client's :func:`data_type` sequence, as tensors (in a graph)."""
    return data.get_single_element()


def tensors(
    x: np.ndarray,
    y: np.ndarray,
    batch_size: int,
    shuffle_seed: int,
    repeats: int = 1,
) -> tf.data.Dataset:
    """One client's value of :func:`data_type` (``y`` keeps an integer or float dtype: labels
    or reconstruction targets)."""
    if batch_size < 1 or repeats < 1:
        raise ValueError(f"batch size and repeats must be >= 1, got {batch_size} and {repeats}")
    if len(x) != len(y) or len(y) == 0:
        raise ValueError(f"need as many targets as examples (at least one), got {len(x)}/{len(y)}")
    y = np.asarray(y)
    element = collections.OrderedDict(
        x=np.asarray(x, np.float32),
        y=y.astype(np.int64) if np.issubdtype(y.dtype, np.integer) else y.astype(np.float32),
        shuffle_seed=np.int64(shuffle_seed),
        batch_size=np.int32(batch_size),
        repeats=np.int32(repeats),
    )
    return tf.data.Dataset.from_tensors(element)


def client_tensors(
    client: ClientData, batch_size: int, shuffle_seed: int, repeats: int = 1
) -> tf.data.Dataset:
    """A classification client's training windows and labels as :func:`tensors`."""
    return tensors(client.x_train, client.y_train, batch_size, shuffle_seed, repeats)


def reconstruction_tensors(x: np.ndarray, batch_size: int, shuffle_seed: int) -> tf.data.Dataset:
    """An autoencoder client's samples, with themselves as targets, as :func:`tensors`."""
    x = np.asarray(x, np.float32)
    return tensors(x, x, batch_size, shuffle_seed)


def run_epochs(
    data: collections.OrderedDict,
    epochs: int | tf.Tensor,
    step: Callable[[object, tuple[tf.Tensor, tf.Tensor]], object],
    state: object,
) -> object:
    """``state`` after ``epochs * data['repeats']`` epochs of ``step(state, (x, y))`` over
    freshly shuffled batches (module docstring). Traced inside a ``tf.function``; ``state``
    is any nest of tensors whose shapes do not change."""
    n = tf.shape(data["y"], out_type=tf.int32)[0]
    size = data["batch_size"]
    batches = (n + size - 1) // size
    total = tf.cast(epochs, tf.int32) * data["repeats"]

    def epoch(e: tf.Tensor, state: object) -> tuple[tf.Tensor, object]:
        seed = tf.stack([data["shuffle_seed"], tf.cast(e, tf.int64)])
        order = tf.random.experimental.stateless_shuffle(tf.range(n), seed=seed)

        def batch(i: tf.Tensor, state: object) -> tuple[tf.Tensor, object]:
            index = order[i * size : tf.minimum((i + 1) * size, n)]
            pair = (tf.gather(data["x"], index), tf.gather(data["y"], index))
            with step_noise.seeded(step_noise.step_seed(data["shuffle_seed"], e, i)):
                return i + 1, step(state, pair)

        _, state = tf.while_loop(lambda i, _: i < batches, batch, (tf.constant(0), state))
        return e + 1, state

    _, state = tf.while_loop(lambda e, _: e < total, epoch, (tf.constant(0), state))
    return state


def run_chunks(
    data: collections.OrderedDict,
    size: int,
    body: Callable[[object, tuple[tf.Tensor, tf.Tensor]], object],
    state: object,
) -> object:
    """``state`` after ``body(state, (x, y))`` over the client's examples in order, in
    chunks of ``size`` (a pass without training: gradients and losses over all the data)."""
    n = tf.shape(data["y"], out_type=tf.int32)[0]

    def chunk(start: tf.Tensor, state: object) -> tuple[tf.Tensor, object]:
        end = tf.minimum(start + size, n)
        return end, body(state, (data["x"][start:end], data["y"][start:end]))

    _, state = tf.while_loop(lambda start, _: start < n, chunk, (tf.constant(0), state))
    return state
