"""Benchmark: round times of the TFF engine against Keras ``fit`` over the same windows.

1. A TFF FedAvg round against Keras ``fit`` of one model on the same clients' windows (same
   model, Adam(1e-3), batch 32, E local epochs): the overhead of running rounds as TFF
   computations.
2. A CA-AFP Phase-3 round on the same clients (split into clusters of 8/1/1, masks at 70 %,
   proximal term, one scoring round every f = 5) against the FedAvg round: the cost of
   clustering, masking and the score statistics. The pipeline runs all clusters of a round as
   one TFF computation (:mod:`fedprune.engine.clustered`); the earlier concurrent
   per-cluster calls are timed beside it.

    make bench                      # real UCI-HAR, 10 clients, E=3
    python experiments/bench_round.py --dataset wisdm --rounds 10
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_federated as tff  # noqa: E402

from fedprune.data.registry import load_federated  # noqa: E402
from fedprune.engine.client_work import LocalTraining  # noqa: E402
from fedprune.engine.clustered import build_clustered_round, run_clustered_round  # noqa: E402
from fedprune.engine.process import (  # noqa: E402
    build_fedavg_process,
    build_learning_process,
    with_client_work_state,
)
from fedprune.engine.rounds import (  # noqa: E402
    run_round,
    run_rounds_concurrently,
    sample_clients,
)
from fedprune.models.spec import ModelSpec  # noqa: E402
from fedprune.sparsity import masks as M  # noqa: E402
from fedprune.sparsity.layers import prunable_mask_flags  # noqa: E402
from fedprune.workers import execution  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="uci_har", choices=("uci_har", "wisdm"))
    parser.add_argument("--clients-per-round", type=int, default=10)
    parser.add_argument("--local-epochs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=6, help="timed repetitions (after warm-up)")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()

    data = load_federated(args.dataset, seed=0, data_dir=args.data_dir)
    spec = ModelSpec(data.input_shape, data.num_classes, seed=0)
    ids = sample_clients([c.client_id for c in data.clients], args.clients_per_round, 0, 1)
    clients = [data.client(i) for i in ids]
    windows = sum(c.num_train for c in clients) * args.local_epochs
    init = [np.asarray(w) for w in spec.initial_weights().trainable]
    flags = prunable_mask_flags(spec.keras())
    rng = np.random.default_rng(0)
    kernels = M.prune_to(
        [np.ones_like(w) for w, f in zip(init, flags) if f],
        [rng.random(w.shape) for w, f in zip(init, flags) if f],
        0.7,
    )
    it = iter(kernels)
    mask = [next(it) if f else np.ones_like(w) for w, f in zip(init, flags)]
    groups = [clients[:-2], clients[-2:-1], clients[-1:]]

    execution.install()
    try:
        fedavg = build_fedavg_process(spec, args.local_epochs)
        state = fedavg.initialize()
        run_round(fedavg, state, clients, 0, 0, 32)  # warm-up (tracing)

        training = LocalTraining(args.local_epochs, prox=1e-3, masked=True)
        plain = build_learning_process(spec, training)
        measuring = build_learning_process(
            spec, LocalTraining(**{**training.__dict__, "statistics": True})
        )
        base = with_client_work_state(
            plain.set_model_weights(
                plain.initialize(), tff.learning.models.ModelWeights(M.apply(init, mask), [])
            ),
            mask=mask,
            anchor=init,
        )

        def fedavg_round(r: int) -> None:
            run_round(fedavg, state, clients, r + 1, 0, 32)

        def one_call(r: int) -> None:
            run_round(plain, base, clients, r + 1, 0, 32)

        def split(r: int) -> None:
            run_rounds_concurrently([(plain, base, g) for g in groups], r + 1, 0, 32)

        def scoring(r: int) -> None:
            run_rounds_concurrently([(measuring, base, g) for g in groups], r + 1, 0, 32)

        clustered_plain = build_clustered_round(spec, training, len(groups))
        clustered_measuring = build_clustered_round(
            spec, LocalTraining(**{**training.__dict__, "statistics": True}), len(groups)
        )
        start = {c: M.apply(init, mask) for c in range(len(groups))}
        masks = {c: mask for c in range(len(groups))}
        members = dict(enumerate(groups))

        def clustered(r: int) -> None:
            run_clustered_round(clustered_plain, start, masks, init, members, r + 1, 0, 32)

        def clustered_scoring(r: int) -> None:
            run_clustered_round(clustered_measuring, start, masks, init, members, r + 1, 0, 32)

        # Keras models must be built after the TFF processes (which build theirs in graphs)
        x = np.concatenate([c.x_train for c in clients])
        y = np.concatenate([c.y_train for c in clients])
        model = spec.keras()
        model.compile(tf.keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy")

        def keras_fit(r: int) -> None:
            model.fit(x, y, batch_size=32, epochs=args.local_epochs, verbose=0)

        for warm in (split, scoring, clustered, clustered_scoring, keras_fit):
            warm(0)
        # Interleaved: each CA-AFP variant is timed right after a FedAvg round, and the
        # ratios of those pairs are reported, so machine-speed drift cancels out.
        names = ("keras", "one_call", "split", "scoring", "clustered", "clustered_scoring")
        pairs = {name: [] for name in names}
        fedavg_times = []
        for r in range(args.rounds):
            for name, fn in (
                ("keras", keras_fit),
                ("one_call", one_call),
                ("split", split),
                ("scoring", scoring),
                ("clustered", clustered),
                ("clustered_scoring", clustered_scoring),
            ):
                base_s = _time(fedavg_round, r)
                fedavg_times.append(base_s)
                pairs[name].append(_time(fn, r) / base_s)
        fedavg_s = float(np.median(fedavg_times))
        fit_s = fedavg_s * float(np.median(pairs["keras"]))
        ratio = {name: float(np.median(v)) for name, v in pairs.items()}
        # CA-AFP's mean over a 5-round cycle: 4 plain rounds and 1 scoring round
        ratio["caafp_split"] = (4 * ratio["split"] + ratio["scoring"]) / 5
        ratio["caafp"] = (4 * ratio["clustered"] + ratio["clustered_scoring"]) / 5
    finally:
        execution.shutdown()

    print(
        f"{args.dataset}: {len(clients)} clients, {windows} windows per round "
        f"(E={args.local_epochs})"
    )
    print(f"  Keras fit         {fit_s:6.2f} s  {windows / fit_s:7.0f} windows/s")
    print(f"  TFF FedAvg round  {fedavg_s:6.2f} s  {windows / fedavg_s:7.0f} windows/s")
    print(
        f"  FedAvg round / Keras fit  {1 / float(np.median(pairs['keras'])):5.2f}  (paired median)"
    )
    print("  CA-AFP (clusters 8/1/1, 70 % masks, proximal term) / FedAvg round, paired medians:")
    print(f"    masked + proximal, one TFF call for all clients  {ratio['one_call']:5.2f}")
    print(f"    all clusters in one TFF computation (pipeline)   {ratio['clustered']:5.2f}")
    print(f"    the same, a scoring round (extra gradient pass)  {ratio['clustered_scoring']:5.2f}")
    print(f"    before: concurrent per-cluster calls             {ratio['split']:5.2f}")
    print(f"    before: a scoring round in per-cluster calls     {ratio['scoring']:5.2f}")
    print(f"  CA-AFP round / FedAvg round (1 scoring round in 5)  {ratio['caafp']:5.2f}")
    print(f"    before (per-cluster calls)                        {ratio['caafp_split']:5.2f}")


def _time(fn, r: int) -> float:  # noqa: ANN001
    t0 = time.perf_counter()
    fn(r)
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
