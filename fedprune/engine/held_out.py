"""Held-out accuracy while a run trains (``--eval-every N``): every N rounds and after the
last, a model's accuracy on its clients' test windows, written into the round's metrics row
(column ``test_acc``) and so into TensorBoard.

The number is the mean over the clients of each client's test accuracy, as the runs' final
``avg_acc``. It is only watched: nothing in training or model selection reads it, so the
test windows stay out of training (the time-ordered split keeps them apart, see
:mod:`fedprune.data.partition`). Evaluation runs in Keras on the training process, with
dropout off; it draws no random numbers, so a run with and without it trains the same.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import tensorflow as tf

from fedprune.data.partition import ClientData
from fedprune.engine.evaluation import client_accuracies

COLUMN = "test_acc"


@dataclasses.dataclass
class HeldOut:
    """Evaluation every ``every`` rounds (0: never) and at round ``total``, with a model
    ``model_fn`` builds for each evaluation.

    A fresh model each time, because Keras switches its model classes between graph and eager
    behaviour in place when a model is built while TFF traces a computation: a model built
    before that trace then predicts through the graph-mode code and fails. Building one costs
    milliseconds against the evaluation's seconds."""

    every: int
    total: int
    model_fn: Callable[[], tf.keras.Model]
    clients: Mapping[int, ClientData]

    def due(self, t: int) -> bool:
        return self.every > 0 and (t % self.every == 0 or t == self.total)

    def accuracy(self, trainable: Sequence[np.ndarray], ids: Sequence[int]) -> float:
        """Mean test accuracy over clients ``ids`` of the model with these trainable weights."""
        model = self.model_fn()
        accuracies = client_accuracies(model, [self.clients[i] for i in ids], list(trainable))
        return round(float(np.mean(list(accuracies.values()))), 6)
