"""Phase 4 of CA-AFP: each client fine-tunes its cluster model under the fixed mask (Eq. 12).

min CE_k(v_k) subject to v_k ⊙ M_c = v_k: the mask is re-applied after every optimizer step
(as Keras applies a kernel constraint), so a personal model is exactly as sparse as its
cluster's mask. Several fine-tuning lengths come from one pass: train to the smallest E,
evaluate, continue to the next (the optimizer state carries over, so E=25 is the same as 25
epochs in one go). Fine-tuning is local: no communication. All clients train at once
(:mod:`fedprune.engine.stacked`): 3-4x faster than one Keras ``fit`` per client here. A model
with layers stacked training does not know (your own model, e.g. with normalization or global
pooling) is fine-tuned one client after another (:mod:`fedprune.engine.masked_fit`), with the
same per-client semantics and one note line saying so.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence

import numpy as np
from tqdm import tqdm

from fedprune.data.partition import ClientData, FederatedData
from fedprune.engine.masked_fit import MaskedClientModel
from fedprune.engine.metrics import accuracy, fairness
from fedprune.engine.stacked import StackedModel, plan_of, predict_each
from fedprune.models.spec import ModelSpec
from fedprune.models.user import UserModel
from fedprune.sparsity.layers import kernel_flags, select


def finetune_all(
    input_shape: tuple[int, ...],
    num_classes: int,
    clients: Sequence[ClientData],
    start: Mapping[int, Sequence[np.ndarray]],
    kernel_masks: Mapping[int, Sequence[np.ndarray]],
    epochs: Sequence[int],
    seed: int,
    batch_size: int = 32,
    learning_rate: float = 1e-3,
    progress: object | None = None,
    conv: str = "auto",
    model: str | UserModel = "har_cnn",
) -> dict[int, dict[int, tuple[float, list[np.ndarray]]]]:
    """{E: {client id: (test accuracy, weights)}} after E epochs, for each E in ``epochs``.

    Every client trains its own copy from ``start[id]`` with Adam, batch mean cross entropy
    and ``kernel_masks[id]`` re-applied after every step, its own shuffling and dropout seeds
    (drawn from ``[seed, id]``). All clients train at once as one stacked computation
    (:mod:`fedprune.engine.stacked`; per client the same as Keras ``fit``). ``progress``
    (a tqdm bar over epochs) advances by each group's share of an epoch, so its estimate of
    the time left is live within an epoch of thousands of clients; ``conv`` picks the stacked
    convolution's formulation (:class:`~fedprune.engine.stacked.StackedModel`); ``model`` is
    the table model or your own (:class:`~fedprune.models.user.UserModel`).
    """
    ids = [client.client_id for client in clients]
    seeds = [int(np.random.default_rng([seed, cid]).integers(2**31 - 1)) for cid in ids]
    spec = ModelSpec(tuple(input_shape), num_classes, seed, model)
    keras = spec.keras()
    try:
        plan_of(keras)
    except ValueError as why:
        print(
            f"fedprune: note: fine-tuning one client after another ({why})",
            file=sys.stderr,
        )
        return _finetune_each(
            spec, clients, start, kernel_masks, epochs, seeds, batch_size, learning_rate, progress
        )
    stack = StackedModel(
        keras,
        [start[cid] for cid in ids],
        [kernel_masks[cid] for cid in ids],
        seeds,
        learning_rate,
        conv,
    )
    shuffles = [np.random.default_rng(s) for s in seeds]
    out: dict[int, dict[int, tuple[float, list[np.ndarray]]]] = {}
    done = 0
    for e in sorted(set(epochs)):
        stack.fit_epochs(
            [c.x_train for c in clients],
            [c.y_train for c in clients],
            e - done,
            batch_size,
            shuffles,
            on_progress=None if progress is None else progress.update,
        )
        done = e
        probs = predict_each(stack, [c.x_test for c in clients])
        out[e] = {
            cid: (accuracy(client.y_test, p), stack.client_weights(k))
            for k, (cid, client, p) in enumerate(zip(ids, clients, probs))
        }
    return out


def _finetune_each(
    spec: ModelSpec,
    clients: Sequence[ClientData],
    start: Mapping[int, Sequence[np.ndarray]],
    kernel_masks: Mapping[int, Sequence[np.ndarray]],
    epochs: Sequence[int],
    seeds: Sequence[int],
    batch_size: int,
    learning_rate: float,
    progress: object | None,
) -> dict[int, dict[int, tuple[float, list[np.ndarray]]]]:
    """:func:`finetune_all` one client after another (:mod:`fedprune.engine.masked_fit`)."""
    lengths = sorted(set(epochs))
    out: dict[int, dict[int, tuple[float, list[np.ndarray]]]] = {e: {} for e in lengths}
    if progress is not None:  # the bar counts clients, as they finish one after another
        progress.reset(total=len(clients))
        progress.unit = "client"
    for client, client_seed in zip(clients, seeds):
        cid = client.client_id
        fitted = MaskedClientModel(
            lambda s: ModelSpec(spec.input_shape, spec.num_classes, s, spec.model).keras(),
            start[cid],
            kernel_masks[cid],
            client_seed,
            learning_rate,
        )
        rng, done = np.random.default_rng(client_seed), 0
        for e in lengths:
            fitted.fit_epochs(client.x_train, client.y_train, e - done, batch_size, rng)
            done = e
            out[e][cid] = (accuracy(client.y_test, fitted.predict(client.x_test)), fitted.weights())
        if progress is not None:
            progress.update(1)
    return out


@dataclasses.dataclass
class FineTuned:
    """Phase 4's result: per length E the summary entry (``avg_acc``, ``fairness``,
    ``client_acc``) and every client's personal model, and the mean personal sparsity over
    the prunable kernels after the longest fine-tuning."""

    summary: dict[str, dict]
    models: dict[int, dict[int, list[np.ndarray]]]  # {E: {client id: weights}}
    sparsity: float


def finetune_and_evaluate(
    data: FederatedData,
    start: Mapping[int, Sequence[np.ndarray]],
    kernel_masks: Mapping[int, Sequence[np.ndarray]],
    epochs: Sequence[int],
    seed: int,
    batch_size: int,
    learning_rate: float,
    desc: str,
    progress: bool = True,
    model: str | UserModel = "har_cnn",
) -> FineTuned:
    """Phase 4 for every client of ``data`` (:func:`finetune_all` with a progress bar over
    epochs, described by ``desc``), evaluated on each client's test windows. The caller
    saves the personal models (:func:`fedprune.runs.artefacts.write_personal_models`)."""
    bar = tqdm(total=max(epochs), desc=desc, unit="epoch", disable=not progress)
    tuned = finetune_all(
        data.input_shape,
        data.num_classes,
        data.clients,
        start,
        kernel_masks,
        epochs,
        seed,
        batch_size,
        learning_rate,
        progress=bar,
        model=model,
    )
    bar.close()
    summary, models, sparsities = {}, {}, []
    for e, per_client in tuned.items():
        client_acc = {cid: acc for cid, (acc, _) in per_client.items()}
        summary[str(e)] = {
            "avg_acc": float(np.mean(list(client_acc.values()))),
            "fairness": fairness(client_acc),
            "client_acc": {str(k): v for k, v in client_acc.items()},
        }
        models[e] = {cid: ws for cid, (_, ws) in per_client.items()}
        flags = kernel_flags(ModelSpec(data.input_shape, data.num_classes, seed, model))
        sparsities = [
            1.0
            - sum(int(np.count_nonzero(w)) for w in select(ws, flags))
            / sum(w.size for w in select(ws, flags))
            for _, ws in per_client.values()
        ]
    return FineTuned(summary, models, float(np.mean(sparsities)))
