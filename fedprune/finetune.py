"""Phase 4 of CA-AFP: each client fine-tunes its cluster model under the fixed mask (Eq. 12).

min CE_k(v_k) subject to v_k ⊙ M_c = v_k: the kernels carry a :class:`MaskConstraint`, which
Keras applies after every optimizer step, so a personal model is exactly as sparse as its
cluster's mask. Several fine-tuning lengths come from one pass: train to the smallest E,
evaluate, continue to the next (the optimizer state carries over, so E=25 is the same as 25
epochs in one go). Fine-tuning is local: no communication.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf
from tqdm import tqdm

from fedprune.data.partition import ClientData, FederatedData
from fedprune.metrics import accuracy, fairness
from fedprune.models.cnn1d import MaskConstraint, build_har_cnn


def masked_layers(model: tf.keras.Model) -> list[tf.keras.layers.Layer]:
    return [
        layer
        for layer in model.layers
        if isinstance(getattr(layer, "kernel_constraint", None), MaskConstraint)
    ]


def finetune_client(
    model: tf.keras.Model,
    client: ClientData,
    weights: Sequence[np.ndarray],
    kernel_masks: Sequence[np.ndarray],
    epochs: Sequence[int],
    seed: int,
    batch_size: int = 32,
    learning_rate: float = 1e-3,
) -> dict[int, tuple[float, list[np.ndarray]]]:
    """{E: (test accuracy, weights)} after E epochs, for each E in ``epochs`` (ascending)."""
    layers = masked_layers(model)
    if len(layers) != len(kernel_masks):
        raise ValueError(f"{len(kernel_masks)} masks for {len(layers)} masked kernels")
    for layer, mask in zip(layers, kernel_masks):
        layer.kernel_constraint.mask.assign(mask)
    model.set_weights([np.asarray(w) for w in weights])
    tf.keras.utils.set_random_seed(seed)
    model.compile(
        optimizer=tf.keras.optimizers.Adam(learning_rate),
        loss="sparse_categorical_crossentropy",
    )
    results, done = {}, 0
    for e in sorted(set(epochs)):
        if e > done:
            model.fit(
                client.x_train,
                client.y_train,
                batch_size=batch_size,
                epochs=e - done,
                shuffle=True,
                verbose=0,
            )
            done = e
        probs = model(client.x_test, training=False).numpy()
        results[e] = (accuracy(client.y_test, probs), [w.copy() for w in model.get_weights()])
    return results


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
) -> dict[int, dict[int, tuple[float, list[np.ndarray]]]]:
    """{E: {client id: (accuracy, weights)}} for every client (one compiled model reused)."""
    model = build_har_cnn(input_shape, num_classes, seed=seed, masked=True)
    out: dict[int, dict[int, tuple[float, list[np.ndarray]]]] = {e: {} for e in epochs}
    for client in clients:
        cid = client.client_id
        per_e = finetune_client(
            model,
            client,
            start[cid],
            kernel_masks[cid],
            epochs,
            seed=int(np.random.default_rng([seed, cid]).integers(2**31 - 1)),
            batch_size=batch_size,
            learning_rate=learning_rate,
        )
        for e, value in per_e.items():
            out[e][cid] = value
        if progress is not None:
            progress.update(1)
    return out


def finetune_and_evaluate(
    run_path: Path,
    data: FederatedData,
    start: Mapping[int, Sequence[np.ndarray]],
    kernel_masks: Mapping[int, Sequence[np.ndarray]],
    config: object,
    progress: bool = True,
) -> tuple[dict, float]:
    """Phase 4 for every client, saved as ``personal_ft<E>.npz``; returns the summary's
    ``finetune`` entry ({E: avg_acc, fairness, client_acc}) and the mean personal sparsity
    over the prunable kernels. ``config`` supplies method, dataset, ft_epochs, seed,
    batch_size and learning_rate."""
    bar = tqdm(
        total=data.num_clients,
        desc=f"{config.method} {config.dataset} fine-tuning",
        unit="client",
        disable=not progress,
    )
    tuned = finetune_all(
        data.input_shape,
        data.num_classes,
        data.clients,
        start,
        kernel_masks,
        config.ft_epochs,
        config.seed,
        config.batch_size,
        config.learning_rate,
        progress=bar,
    )
    bar.close()
    finetune, sparsities = {}, []
    for e, per_client in tuned.items():
        client_acc = {cid: acc for cid, (acc, _) in per_client.items()}
        finetune[str(e)] = {
            "avg_acc": float(np.mean(list(client_acc.values()))),
            "fairness": fairness(client_acc),
            "client_acc": {str(k): v for k, v in client_acc.items()},
        }
        np.savez(
            Path(run_path) / f"personal_ft{e}.npz",
            **{
                f"client{cid}_{i}": w
                for cid, (_, ws) in per_client.items()
                for i, w in enumerate(ws)
            },
        )
        sparsities = [
            1.0
            - sum(int(np.count_nonzero(w)) for w in ws if w.ndim > 1)
            / sum(w.size for w in ws if w.ndim > 1)
            for _, ws in per_client.values()
        ]
    return finetune, float(np.mean(sparsities))
