"""Benchmark: Phase-4 fine-tuning of every client, stacked against one Keras ``fit`` per client,
with TensorFlow's oneDNN kernels off and on.

Every variant trains every client's copy of the CNN from the same start under the same 70 %
masks (Adam 1e-3, batch 32, E epochs, masks re-applied after every step) and evaluates it on
the client's test windows:

* ``stacked grouped`` / ``stacked per-client``:
  ``fedprune.algorithms.caafp.finetune.finetune_all``, all clients as one stacked
  computation (``fedprune.engine.stacked``) with either convolution formulation;
  ``grouped`` needs oneDNN (its gradient has no other CPU kernel) and is listed as "not
  available" where it does not run;
* ``Keras fit per client``: one masked Keras model, compiled and fitted client after client.

oneDNN can only be chosen before TensorFlow is imported, so each setting
(``TF_ENABLE_ONEDNN_OPTS=0`` and ``=1``) runs in its own child process; the table marks the
formulation fedprune picks by default in each setting. Accuracies differ only through the
random shuffling and dropout streams.

    make bench                                   # real UCI-HAR, 30 clients, E = 25, both settings
    python experiments/bench_finetune.py --dataset wisdm --epochs 5 --onednn 0
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

SETTINGS = ("0", "1")
VARIANTS = ("stacked grouped", "stacked per-client", "Keras fit per client")


def keras_per_client(data, start, masks, epochs: int) -> list[float]:  # noqa: ANN001
    """One masked Keras model, compiled and fitted once per client."""
    import tensorflow as tf

    from fedprune.engine.metrics import accuracy
    from fedprune.models.spec import ModelSpec

    spec = ModelSpec(data.input_shape, data.num_classes, seed=0)
    model = spec.keras(masked=True)
    kernels = [model.get_layer(name) for name in spec.entry().kernel_layers]
    accs = []
    for client in data.clients:
        for layer, mask in zip(kernels, masks):
            layer.kernel_constraint.mask.assign(mask)
        model.set_weights(start)
        model.compile(tf.keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy")
        model.fit(client.x_train, client.y_train, batch_size=32, epochs=epochs, verbose=0)
        accs.append(accuracy(client.y_test, model(client.x_test, training=False).numpy()))
    return accs


def measure(dataset: str, epochs: int, data_dir: str | None) -> dict:
    """Every variant that runs in this process: {variant: [seconds, windows/s, accuracy]}."""
    import numpy as np

    from fedprune.algorithms.caafp.finetune import finetune_all
    from fedprune.data.registry import load_federated
    from fedprune.engine.stacked import default_conv_formulation, grouped_conv_gradient_available
    from fedprune.models.spec import ModelSpec
    from fedprune.sparsity import masks as M
    from fedprune.sparsity.layers import kernel_flags, merge, select

    data = load_federated(dataset, seed=0, data_dir=data_dir)
    spec = ModelSpec(data.input_shape, data.num_classes, seed=0)
    weights = spec.keras().get_weights()
    rng = np.random.default_rng(0)
    flags = kernel_flags(spec)
    kernels = select(weights, flags)
    scores = [rng.random(k.shape) for k in kernels]
    masks = M.prune_to([np.ones_like(k) for k in kernels], scores, 0.7)
    start = M.apply(weights, merge(masks, weights, flags))
    ids = [c.client_id for c in data.clients]
    windows = sum(c.num_train for c in data.clients) * epochs

    results: dict[str, list[float] | None] = {}
    for conv in ("grouped", "per-client"):
        if conv == "grouped" and not grouped_conv_gradient_available():
            results[f"stacked {conv}"] = None
            continue
        t0 = time.perf_counter()
        out = finetune_all(
            data.input_shape,
            data.num_classes,
            data.clients,
            {i: start for i in ids},
            {i: masks for i in ids},
            [epochs],
            seed=0,
            conv=conv,
        )
        seconds = time.perf_counter() - t0
        acc = float(np.mean([a for a, _ in out[epochs].values()]))
        results[f"stacked {conv}"] = [seconds, windows / seconds, acc]
    t0 = time.perf_counter()
    acc = float(np.mean(keras_per_client(data, start, masks, epochs)))
    seconds = time.perf_counter() - t0
    results["Keras fit per client"] = [seconds, windows / seconds, acc]
    return {
        "clients": len(ids),
        "windows": windows,
        "default": f"stacked {default_conv_formulation()}",
        "results": results,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="uci_har", choices=("uci_har", "wisdm"))
    parser.add_argument("--epochs", type=int, default=25, help="fine-tuning epochs (25)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument(
        "--onednn",
        choices=("both",) + SETTINGS,
        default="both",
        help="TF_ENABLE_ONEDNN_OPTS settings to measure, each in a child process (both)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # measures in this process, whose environment the parent set
        print(json.dumps(measure(args.dataset, args.epochs, args.data_dir)))
        return

    settings = SETTINGS if args.onednn == "both" else (args.onednn,)
    print(f"{args.dataset}: fine-tuning every client {args.epochs} epochs (70 % masks, batch 32)")
    print(f"  {'TF_ENABLE_ONEDNN_OPTS':<22}{'variant':<22}{'seconds':>8}{'windows/s':>11}  acc")
    for setting in settings:
        command = [sys.executable, __file__, "--child", "--dataset", args.dataset]
        command += ["--epochs", str(args.epochs)]
        if args.data_dir:
            command += ["--data-dir", args.data_dir]
        env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS=setting)
        child = subprocess.run(command, env=env, stdout=subprocess.PIPE, text=True, check=True)
        report = json.loads(child.stdout.strip().splitlines()[-1])
        for variant in VARIANTS:
            row = report["results"][variant]
            mark = " (default)" if variant == report["default"] else ""
            if row is None:
                print(f"  {setting:<22}{variant:<22}{'not available here':>19}")
                continue
            seconds, rate, acc = row
            print(f"  {setting:<22}{variant:<22}{seconds:8.1f}{rate:11.0f}  {acc:.4f}{mark}")


if __name__ == "__main__":
    main()
