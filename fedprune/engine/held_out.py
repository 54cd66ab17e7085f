"""Held-out accuracy while a run trains (``--eval-every N``): every N rounds and after the
last, a model's accuracy on its clients' test windows, written into the round's metrics row
(column ``test_acc``) and so into TensorBoard.

The number is the mean over the clients of each client's test accuracy, as the runs' final
``avg_acc``. It is only watched: nothing in training or model selection reads it, so the
test windows stay out of training (the time-ordered split keeps them apart, see
:mod:`fedprune.data.partition`). It runs on the training process with dropout off and draws
no random numbers, so a run with and without it trains the same.

The forward pass is one ``tf.function`` traced once, when the run starts, over the model's
variables; each evaluation assigns the weights and calls it. Not Keras ``predict``: Keras
switches its model classes to graph-mode behaviour, in place, whenever TFF traces a
computation that builds a model, and a model built before that can no longer ``predict``; a
fresh model per evaluation would also trace a new predict function every time (seconds).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import tensorflow as tf

from fedprune.data.partition import ClientData
from fedprune.engine.metrics import accuracy

COLUMN = "test_acc"
BATCH = 1024


@dataclasses.dataclass
class HeldOut:
    """Evaluation every ``every`` rounds (0: never) and at round ``total`` of the model
    ``model_fn`` builds (once, here) on ``clients``' test windows."""

    every: int
    total: int
    model_fn: Callable[[], tf.keras.Model]
    clients: Mapping[int, ClientData]

    def __post_init__(self) -> None:
        if self.every <= 0:
            return
        model = self.model_fn()
        self._variables = list(model.trainable_variables)
        shape = tf.TensorSpec([None, *model.input_shape[1:]], tf.float32)
        self._forward = tf.function(lambda x: model(x, training=False), input_signature=[shape])
        self._forward.get_concrete_function()  # traced now, while Keras is in eager mode

    def due(self, t: int) -> bool:
        return self.every > 0 and (t % self.every == 0 or t == self.total)

    def accuracy(self, trainable: Sequence[np.ndarray], ids: Sequence[int]) -> float:
        """Mean test accuracy over clients ``ids`` of the model with these trainable weights."""
        for variable, value in zip(self._variables, trainable, strict=True):
            variable.assign(value)
        per_client = []
        for i in ids:
            x = np.asarray(self.clients[i].x_test, np.float32)
            probabilities = np.concatenate(
                [self._forward(x[lo : lo + BATCH]).numpy() for lo in range(0, len(x), BATCH)]
            )
            per_client.append(accuracy(self.clients[i].y_test, probabilities))
        return round(float(np.mean(per_client)), 6)
