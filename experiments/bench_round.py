"""Benchmark: one TFF FedAvg round against Keras ``fit`` over the same windows.

Both train the paper's 1D-CNN with Adam(1e-3), batch 32, E local epochs on the same sampled
clients' training windows. Keras fits one model on their concatenation (what a single machine
would do); TFF trains one model per client inside one federated round. The ratio shows the
overhead of running rounds as TFF computations.

    make bench                      # real UCI-HAR, 10 clients, E=3, 3 timed rounds
    python experiments/bench_round.py --dataset wisdm --rounds 5
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fedprune.data.registry import load_federated  # noqa: E402
from fedprune.engine import execution  # noqa: E402
from fedprune.engine.process import ModelSpec, build_fedavg_process  # noqa: E402
from fedprune.engine.rounds import run_round, sample_clients  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="uci_har", choices=("uci_har", "wisdm"))
    parser.add_argument("--clients-per-round", type=int, default=10)
    parser.add_argument("--local-epochs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (after a warm-up)")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()

    data = load_federated(args.dataset, seed=0, data_dir=args.data_dir)
    spec = ModelSpec(data.input_shape, data.num_classes, seed=0)
    ids = sample_clients([c.client_id for c in data.clients], args.clients_per_round, 0, 1)
    clients = [data.client(i) for i in ids]
    windows = sum(c.num_train for c in clients) * args.local_epochs

    execution.install()
    try:
        process = build_fedavg_process(spec, args.local_epochs)
        state = process.initialize()
        state = run_round(process, state, clients, 0, 0, 32).state  # warm-up (tracing)
        times = []
        for r in range(1, args.rounds + 1):
            t0 = time.perf_counter()
            state = run_round(process, state, clients, r, 0, 32).state
            times.append(time.perf_counter() - t0)
    finally:
        execution.shutdown()

    x = np.concatenate([c.x_train for c in clients])
    y = np.concatenate([c.y_train for c in clients])
    model = spec.keras()
    model.compile(tf.keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy")
    model.fit(x, y, batch_size=32, epochs=1, verbose=0)  # warm-up
    fit_times = []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        model.fit(x, y, batch_size=32, epochs=args.local_epochs, verbose=0)
        fit_times.append(time.perf_counter() - t0)

    tff_s, fit_s = float(np.median(times)), float(np.median(fit_times))
    print(
        f"{args.dataset}: {len(clients)} clients, {windows} windows per round "
        f"(E={args.local_epochs})"
    )
    print(f"  TFF FedAvg round  {tff_s:7.2f} s  {windows / tff_s:8.0f} windows/s")
    print(f"  Keras fit         {fit_s:7.2f} s  {windows / fit_s:8.0f} windows/s")
    print(f"  ratio (TFF / Keras time)  {tff_s / fit_s:.2f}")


if __name__ == "__main__":
    main()
