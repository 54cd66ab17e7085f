"""Plain Keras doing what ``fedprune train fedavg --dataset uci_har --rounds 5
--clients-per-round 10 --seed 0`` does, in one process: the yardstick of
``experiments/bench_startup.py``.

The same data (fedprune's UCI-HAR loader and split), model (the HAR CNN with its seeded
initial weights), clients per round (sampled by (seed, round) as fedprune samples them),
local epochs, batch and Adam(1e-3) per client, and the example-weighted FedAvg mean; the
final model's accuracy on every client's test windows. One Keras model compiled once;
per client ``set_weights``, a fresh Adam state, ``fit``. No TFF.

With ``FEDPRUNE_BENCH_MARKS`` / ``FEDPRUNE_BENCH_T0`` set (by bench_startup.py) it writes the
times of its steps there.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

T0 = float(os.environ.get("FEDPRUNE_BENCH_T0", time.time()))
_marks: list[tuple[str, float, float]] = [("interpreter start", 0.0, time.time() - T0)]


def _mark(name: str, began: float) -> None:
    _marks.append((name, began - T0, time.time() - began))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients-per-round", type=int, default=10)
    parser.add_argument("--local-epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default=os.environ.get("FEDPRUNE_DATA_DIR"))
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

    began = time.time()
    import numpy as np
    import tensorflow as tf

    _mark("import tensorflow (first)", began)
    began = time.time()
    from fedprune.data.registry import load_federated

    data = load_federated("uci_har", seed=args.seed, data_dir=args.data_dir, verbose=False)
    _mark("data loading", began)
    began = time.time()
    from fedprune.models.spec import ModelSpec

    spec = ModelSpec(data.input_shape, data.num_classes, seed=args.seed)
    tf.keras.utils.set_random_seed(args.seed)
    model = spec.keras()
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-3), loss=spec.loss(), metrics=["accuracy"])
    weights = [np.asarray(w) for w in model.get_weights()]
    _mark("building the model", began)
    ids = sorted(c.client_id for c in data.clients)
    by_id = {c.client_id: c for c in data.clients}
    for t in range(1, args.rounds + 1):
        began = time.time()
        rng = np.random.default_rng([args.seed, t])
        chosen = np.sort(rng.choice(ids, size=args.clients_per_round, replace=False)).tolist()
        models, sizes = [], []
        for cid in chosen:
            c = by_id[cid]
            model.set_weights(weights)
            for variable in model.optimizer.variables:
                variable.assign(tf.zeros_like(variable))
            tf.keras.utils.set_random_seed(
                int(np.random.default_rng([args.seed, t, cid]).integers(2**31 - 1))
            )
            model.fit(c.x_train, c.y_train, epochs=args.local_epochs, batch_size=32, verbose=0)
            models.append(model.get_weights())
            sizes.append(len(c.y_train))
        n = np.asarray(sizes, np.float64)
        weights = [
            (sum(k * np.asarray(m[i], np.float64) for k, m in zip(n, models)) / n.sum()).astype(
                np.float32
            )
            for i in range(len(weights))
        ]
        _mark("round", began)
    began = time.time()
    model.set_weights(weights)
    accuracy = [model.evaluate(c.x_test, c.y_test, verbose=0)[1] for c in data.clients]
    _mark("final client accuracies", began)
    print(f"mean client accuracy {float(np.mean(accuracy)):.4f}", file=sys.stderr)
    if "FEDPRUNE_BENCH_MARKS" in os.environ:
        with open(os.environ["FEDPRUNE_BENCH_MARKS"], "w") as f:
            json.dump(_marks, f)


if __name__ == "__main__":
    main()
