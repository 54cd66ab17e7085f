"""Benchmark: Phase-4 fine-tuning of every client, stacked against one Keras ``fit`` per client.

Both train every client's copy of the CNN from the same start under the same 70 % masks (Adam
1e-3, batch 32, E epochs, masks re-applied after every step) and evaluate it on the client's
test windows: ``fedprune.finetune.finetune_all`` trains all clients as one stacked computation
(``fedprune.engine.stacked``), the reference compiles one masked Keras model and calls ``fit``
client after client (what fedprune did before). Reports windows/s and the mean accuracies
(they differ only through the random shuffling and dropout streams).

    make bench                                   # real UCI-HAR, 30 clients, E = 5
    python experiments/bench_finetune.py --dataset wisdm --epochs 25
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fedprune.data.registry import load_federated  # noqa: E402
from fedprune.finetune import finetune_all  # noqa: E402
from fedprune.metrics import accuracy  # noqa: E402
from fedprune.models.cnn1d import build_har_cnn  # noqa: E402
from fedprune.sparsity import masks as M  # noqa: E402


def keras_per_client(data, start, masks, epochs: int) -> list[float]:  # noqa: ANN001
    """One masked Keras model, compiled and fitted once per client."""
    model = build_har_cnn(data.input_shape, data.num_classes, seed=0, masked=True)
    kernels = [layer for layer in model.layers if hasattr(layer, "kernel")]
    accs = []
    for client in data.clients:
        for layer, mask in zip(kernels, masks):
            layer.kernel_constraint.mask.assign(mask)
        model.set_weights(start)
        model.compile(tf.keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy")
        model.fit(client.x_train, client.y_train, batch_size=32, epochs=epochs, verbose=0)
        accs.append(accuracy(client.y_test, model(client.x_test, training=False).numpy()))
    return accs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="uci_har", choices=("uci_har", "wisdm"))
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()

    data = load_federated(args.dataset, seed=0, data_dir=args.data_dir)
    weights = build_har_cnn(data.input_shape, data.num_classes, seed=0).get_weights()
    rng = np.random.default_rng(0)
    kernels = [w for w in weights if w.ndim > 1]
    scores = [rng.random(k.shape) for k in kernels]
    masks = M.prune_to([np.ones_like(k) for k in kernels], scores, 0.7)
    it = iter(masks)
    start = [w * next(it) if w.ndim > 1 else w for w in weights]
    ids = [c.client_id for c in data.clients]
    windows = sum(c.num_train for c in data.clients) * args.epochs

    t0 = time.perf_counter()
    stacked = finetune_all(
        data.input_shape,
        data.num_classes,
        data.clients,
        {i: start for i in ids},
        {i: masks for i in ids},
        [args.epochs],
        seed=0,
    )
    stacked_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    reference = keras_per_client(data, start, masks, args.epochs)
    keras_s = time.perf_counter() - t0

    stacked_acc = np.mean([acc for acc, _ in stacked[args.epochs].values()])
    print(
        f"{args.dataset}: {len(ids)} clients x {args.epochs} epochs, {windows} windows "
        f"(70 % masks, batch 32)"
    )
    print(f"  Keras fit per client  {keras_s:6.1f} s  {windows / keras_s:7.0f} windows/s")
    print(f"  stacked (fedprune)    {stacked_s:6.1f} s  {windows / stacked_s:7.0f} windows/s")
    print(f"  speed-up              {keras_s / stacked_s:6.2f}x")
    print(f"  mean test accuracy    Keras {np.mean(reference):.4f}  stacked {stacked_acc:.4f}")


if __name__ == "__main__":
    main()
