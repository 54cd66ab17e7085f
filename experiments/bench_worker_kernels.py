"""Benchmark: which kernels the TFF worker should run a FedAvg round with, against the tuned peer.

The same FedAvg round as ``bench_round.py`` (10 UCI-HAR clients of round 1, E = 3, batch 32,
Adam 1e-3) in one TFF worker under each setting, and the tuned multi-process plain-Keras peer
(``peer_round.PeerPool``) under the same setting (so "fedprune / peer" compares like kernels):

* ``onednn``: ``TF_ENABLE_ONEDNN_OPTS=1`` (what importing fedprune sets where the variable is
  unset; the worker inherits it);
* ``onednn-avx2``: the same with ``ONEDNN_MAX_CPU_ISA=AVX2`` (an AVX2 CPU's oneDNN, emulated
  on an AVX-512 one);
* ``eigen``: ``TF_ENABLE_ONEDNN_OPTS=0`` (TensorFlow 2.14's default on CPUs without AVX-512
  VNNI/BF16/AMX);
* ``xla``: oneDNN on, the client's training function traced with ``jit_compile=True``.

The worker and the peer's processes are started again under each setting (the variables are
read when a process starts); the settings alternate in order and reverse order, ``--pairs``
times, each time one untimed round and ``--rounds`` timed ones. Prints each setting's median
s/round, the ratio to the first setting (paired), fedprune / peer (paired) and how far one
round's weights move from the first setting's.

    python experiments/bench_worker_kernels.py                  # 3 passes of 2 rounds
    python experiments/bench_worker_kernels.py --variants onednn,eigen --no-peer
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import fedprune  # noqa: E402,F401  (sets TF_ENABLE_ONEDNN_OPTS=1 where unset)

VARIANTS = {
    "onednn": {"TF_ENABLE_ONEDNN_OPTS": "1"},
    "onednn-avx2": {"TF_ENABLE_ONEDNN_OPTS": "1", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "eigen": {"TF_ENABLE_ONEDNN_OPTS": "0"},
    "xla": {"TF_ENABLE_ONEDNN_OPTS": "1"},
}
KERNEL_VARIABLES = ("TF_ENABLE_ONEDNN_OPTS", "ONEDNN_MAX_CPU_ISA")


@contextlib.contextmanager
def kernel_environment(env: dict[str, str]) -> Iterator[None]:
    """The kernel variables set to ``env`` (others of them unset) while processes start."""
    saved = {k: os.environ.pop(k, None) for k in KERNEL_VARIABLES}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v


@contextlib.contextmanager
def jit_compiled_client() -> Iterator[None]:
    """Client computations built inside are traced with ``jit_compile=True``."""
    import fedprune.engine.client_work as client_work

    original = client_work.tf

    class _JitTF:
        def __getattr__(self, name: str) -> object:
            return getattr(original, name)

        @staticmethod
        def function(*args: object, **kwargs: object) -> object:
            return original.function(*args, **{**kwargs, "jit_compile": True})

    client_work.tf = _JitTF()
    try:
        yield
    finally:
        client_work.tf = original


def _timed(fn: object) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3, help="passes over the settings")
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds per setting and pass")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="settings, comma-separated")
    parser.add_argument("--no-peer", action="store_true", help="time fedprune's round only")
    args = parser.parse_args(argv)
    names = args.variants.split(",")
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown setting(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")

    from peer_round import PeerPool

    from fedprune.data.registry import load_federated
    from fedprune.engine.datasets import round_seed
    from fedprune.engine.process import build_fedavg_process
    from fedprune.engine.rounds import run_round, sample_clients
    from fedprune.models.spec import ModelSpec
    from fedprune.workers import execution

    data = load_federated("uci_har", seed=0, verbose=False)
    spec = ModelSpec(data.input_shape, data.num_classes, seed=0)
    ids = sample_clients([c.client_id for c in data.clients], 10, 0, 1)
    clients = [data.client(i) for i in ids]
    processes = {"plain": build_fedavg_process(spec, 3)}
    if "xla" in names:
        with jit_compiled_client():
            processes["xla"] = build_fedavg_process(spec, 3)
    states = {k: p.initialize() for k, p in processes.items()}
    init = [np.asarray(w) for w in spec.keras().get_weights()]
    peer_data = [(c.client_id, np.asarray(c.x_train), np.asarray(c.y_train)) for c in clients]
    peer_seeds = [round_seed(0, 1, c.client_id) for c in clients]

    times = {n: {"fedprune": [], "peer": []} for n in names}
    weights: dict[str, list[np.ndarray]] = {}
    for i in range(args.pairs):
        for name in names if i % 2 == 0 else names[::-1]:
            with kernel_environment(VARIANTS[name]):
                execution.install()
                pool = None if args.no_peer else PeerPool(spec.keras, spec.loss, processes=2)
            key = "xla" if name == "xla" else "plain"
            round_of = functools.partial(run_round, processes[key], states[key], clients, 1, 0, 32)
            _, out = _timed(round_of)
            state = out[0]
            if hasattr(state, "global_model_weights"):
                weights.setdefault(
                    name, [np.asarray(w) for w in state.global_model_weights.trainable]
                )
            if pool is not None:
                pool.round(init, peer_data, peer_seeds, 3, 32)
            for _ in range(args.rounds):
                times[name]["fedprune"].append(_timed(round_of)[0])
                if pool is not None:
                    times[name]["peer"].append(
                        _timed(functools.partial(pool.round, init, peer_data, peer_seeds, 3, 32))[0]
                    )
            if pool is not None:
                pool.close()
            execution.shutdown()
            print(f"pass {i + 1} {name} done; load {open('/proc/loadavg').read().split()[:3]}")

    base = names[0]
    print(f"TensorFlow {tf.__version__}; settings: {', '.join(names)}")
    for name in names:
        fed, peer = times[name]["fedprune"], times[name]["peer"]
        line = f"{name:12s} fedprune {np.median(fed):.2f} s/round"
        if name != base:
            line += (
                f"; / {base} {np.median([a / b for a, b in zip(fed, times[base]['fedprune'])]):.2f}"
            )
        if peer:
            line += f"; peer {np.median(peer):.2f} s/round; fedprune / peer "
            line += f"{np.median([a / b for a, b in zip(fed, peer)]):.2f}"
        if name in weights and base in weights and name != base:
            moved = max(float(np.max(np.abs(a - b))) for a, b in zip(weights[name], weights[base]))
            line += f"; max |w - w({base})| after one round {moved:.2g}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
