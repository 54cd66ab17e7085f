"""Per-round shuffle seeds and the ``tf.data`` pipeline of FedCRef's local
Keras fits (the TFF rounds take tensors instead: :mod:`fedprune.engine.local_loop`)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def round_seed(seed: int, round_num: int, client_id: int) -> int:
    """A 31-bit shuffle seed for one client in one round, independent of sampling order."""
    return int(np.random.default_rng([seed, round_num, client_id]).integers(2**31 - 1))


def reconstruction_dataset(x: np.ndarray, batch_size: int, shuffle_seed: int) -> tf.data.Dataset:
    """(x, x) batches of one client's (or one cluster's) samples for an autoencoder."""
    x = np.asarray(x, np.float32)
    ds = tf.data.Dataset.from_tensor_slices((x, x))
    ds = ds.shuffle(len(x), seed=shuffle_seed, reshuffle_each_iteration=True)
    return ds.batch(batch_size)
