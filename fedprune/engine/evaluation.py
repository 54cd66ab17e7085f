"""Per-client test accuracy of Keras models (evaluation happens on the clients, in Keras)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import tensorflow as tf

from fedprune.data.partition import ClientData
from fedprune.engine.metrics import accuracy


def load_weights(model: tf.keras.Model, weights: Sequence[np.ndarray]) -> None:
    """All of ``model``'s weights, or only its trainable ones where ``weights`` holds those
    (what the rounds train; a model's non-trainable statistics then stay as they are)."""
    if len(weights) == len(model.weights) or len(weights) != len(model.trainable_weights):
        model.set_weights(weights)
        return
    for variable, value in zip(model.trainable_weights, weights):
        variable.assign(value)


def client_accuracies(
    model: tf.keras.Model,
    clients: Sequence[ClientData],
    weights: Mapping[int, list[np.ndarray]] | list[np.ndarray] | None = None,
    batch_size: int = 1024,
) -> dict[int, float]:
    """Test accuracy of each client, with one shared weight list or one list per client id.

    With shared (or no) weights all test sets go through one ``predict`` call.
    """
    if weights is None or not isinstance(weights, Mapping):
        if weights is not None:
            load_weights(model, weights)
        x = np.concatenate([c.x_test for c in clients])
        probs = model.predict(x, batch_size=batch_size, verbose=0)
        bounds = np.cumsum([0] + [len(c.y_test) for c in clients])
        return {
            c.client_id: accuracy(c.y_test, probs[lo:hi])
            for c, lo, hi in zip(clients, bounds[:-1], bounds[1:])
        }
    result = {}
    for c in clients:
        load_weights(model, weights[c.client_id])
        result[c.client_id] = accuracy(
            c.y_test, model.predict(c.x_test, batch_size=batch_size, verbose=0)
        )
    return result
