"""The clients' local objectives of CA-AFP: Eq. 1 and Eq. 5, on one batch, in TensorFlow.

Both are computed per batch (the mean over the batch's examples), as every optimizer step
minimizes them; over an epoch that is the paper's mean over D_k in expectation. The same
functions serve the TFF client work (:mod:`fedprune.engine.client_work`) and its score
statistics (the gradient of Eq. 5 whose sign Eq. 11 averages).

Interpretations:

* Eq. 1 is the cross entropy of the classifier; for FedCRef's autoencoder the same slot holds
  its reconstruction MSE: :func:`local_loss` is the model's own loss (the spec's ``loss()``).
* Eq. 5's w_p,k is the ``anchor`` the server broadcasts (for CA-AFP the Phase-1 model
  w^(T0) for every client; FedCHAR's personalization term is the same function).
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf
import tensorflow_federated as tff


def local_loss(
    model: tff.learning.models.VariableModel, batch: object, training: bool = True
) -> tuple[tff.learning.models.BatchOutput, tf.Tensor]:
    """Eq. 1: L_k^CE(w; batch) = -1/|batch| sum log p(y|x), with dropout on when
    ``training`` (local steps) and off otherwise (the score statistics' gradient).

    Returns the forward pass (predictions for the accuracy metric) and the loss.
    """
    out = model.forward_pass(batch, training=training)
    return out, out.loss


def proximal_term(
    weights: Sequence[tf.Tensor], anchor: Sequence[tf.Tensor], prox: float
) -> tf.Tensor:
    """The second term of Eq. 5: lambda / 2 * ||w - w_p,k||², summed over all tensors."""
    return 0.5 * prox * tf.add_n([tf.reduce_sum(tf.square(w - a)) for w, a in zip(weights, anchor)])


def proximal_objective(
    model: tff.learning.models.VariableModel,
    batch: object,
    weights: Sequence[tf.Tensor],
    anchor: Sequence[tf.Tensor] | None,
    prox: float,
) -> tuple[tff.learning.models.BatchOutput, tf.Tensor]:
    """Eq. 5: L_k^c(w) = L_k^CE(w) + lambda / 2 * ||w - w_p,k||² (``anchor`` = w_p,k,
    ``prox`` = lambda); with ``anchor`` None it is Eq. 1 (:func:`local_loss`).

    ``weights`` are the model's trainable variables, in ``anchor``'s order.
    """
    out, loss = local_loss(model, batch)
    if anchor is not None:
        loss += proximal_term(weights, anchor, prox)
    return out, loss
