"""Benchmark: how far fedprune's client training is from what TensorFlow's kernels allow here.

For the HAR CNN (UCI-HAR windows, CA-AFP and FedAvg) and the AS-CFL image CNN (MNIST, the
scaled study's model) it prints:

1. FLOPs per window, counted from the model (:mod:`fedprune.models.flops`);
2. this machine's matrix-product peak: numpy float32 2048 x 2048 products (one thread and all
   cores) and TensorFlow's own, one product per core at once; the larger is the peak;
3. the **zero-overhead round**: the same clients' local epochs (same batch size, optimizer
   and epochs) as one ``tf.while_loop`` per client in one ``tf.function``, no TFF, one client
   per core at a time, one TensorFlow thread each (the fastest way measured to run a round's
   clients on TF's kernels); as GFLOP/s and as a share of the peak;
4. each round type of a run timed right after a zero-overhead round (paired medians, so the
   machine's speed drift cancels): TFF FedAvg round / zero-overhead (target <= 1.15), CA-AFP
   rounds (clusters 8/1/1, 70 % masks, proximal term; a scoring round), CA-AFP round (one
   scoring round in five) / FedAvg round (target <= 1.10); AS-CFL's update round / its
   zero-overhead round;
5. fedprune's FedAvg round against its peer, the same round as a tuned multi-process
   plain-Keras client loop (``experiments/peer_round.py``: one long-lived spawned worker per
   core, its model compiled once, ``set_weights`` / ``fit`` / ``get_weights`` per client,
   the server's example-weighted mean): s/round of each (rounds 2..N, medians) and
   **fedprune round / tuned peer round** (interleaved pairs);
6. one whole CA-AFP UCI-HAR (0,0,50) run, as a user runs it (a separate process with the
   default settings), its work in TFLOP (windows trained in local epochs, the scoring gradient
   passes, fine-tuning, the evaluations; from the run's configuration, data and clusters) and
   **run time / bound**, bound = work / the zero-overhead rate (target <= 1.3).

The rounds are measured with one TensorFlow intra-op thread and one inter-op thread per core
(the settings fedprune gives its TFF workers): the benchmark restarts itself with them.

    make bench                                  # all of it, real data
    python experiments/bench_round.py --rounds 3 --no-run
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_federated as tff  # noqa: E402

from edge_export.verify import cpu_name  # noqa: E402
from fedprune.data.partition import ClientData  # noqa: E402
from fedprune.engine import local_loop, step_noise  # noqa: E402
from fedprune.models import flops  # noqa: E402
from fedprune.models.spec import ModelSpec  # noqa: E402

BATCH = 32
_FIELDS = ("x", "y", "shuffle_seed", "batch_size", "repeats")


def onednn() -> str:
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    default = "on" if any(f in flags for f in ("avx512_vnni", "avx512_bf16", "amx")) else "off"
    setting = os.environ.get("TF_ENABLE_ONEDNN_OPTS")
    return {"0": "off", "1": "on"}.get(setting or "", default)


def vector_units() -> str:
    """AVX-512 / AVX2 (and AMX) as /proc/cpuinfo's flags name them."""
    flags = set()
    if os.path.exists("/proc/cpuinfo"):
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return isa + (" + AMX" if "amx_tile" in flags else "")


def sgemm_gflops(threads: int | None, size: int = 2048, repeats: int = 5) -> float:
    """numpy float32 matrix products of ``size`` x ``size``; best of ``repeats``."""
    from threadpoolctl import threadpool_limits

    a = np.random.default_rng(0).random((size, size), np.float32)
    b = np.random.default_rng(1).random((size, size), np.float32)
    with threadpool_limits(limits=threads):
        a @ b  # warm-up
        best = min(_time(lambda: a @ b) for _ in range(repeats))
    return 2 * size**3 / best / 1e9


def tf_matmul_gflops(size: int = 2048, repeats: int = 5) -> float:
    """TensorFlow's own float32 matrix product (its BLAS: oneDNN or Eigen), one product per
    core at once (each on one intra-op thread here)."""
    a = tf.random.stateless_uniform((size, size), (0, 1))
    b = tf.random.stateless_uniform((size, size), (0, 2))
    product = tf.function(lambda: tf.reduce_sum(tf.matmul(a, b)))
    product()
    cores = _cores()

    def all_cores() -> None:
        threads = [threading.Thread(target=lambda: product().numpy()) for _ in range(cores)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    return cores * 2 * size**3 / min(_time(all_cores) for _ in range(repeats)) / 1e9


def _cores() -> int:
    return len(os.sched_getaffinity(0)) or 1


class ZeroOverhead:
    """The clients' local epochs as one ``tf.while_loop`` per client in one ``tf.function``
    (:func:`fedprune.engine.local_loop.run_epochs`), the same model, optimizer and batches as
    the client work, without TFF."""

    def __init__(self, spec: ModelSpec, optimizer: tff.learning.optimizers.Optimizer):
        self.model = step_noise.seed_random_layers(spec.keras())
        self.loss = spec.loss()
        self.start = [tf.identity(v) for v in self.model.trainable_variables]
        self.optimizer = optimizer
        x, y = spec.input_spec()
        element = {
            "x": x, "y": y,
            "shuffle_seed": tf.TensorSpec([], tf.int64),
            "batch_size": tf.TensorSpec([], tf.int32),
            "repeats": tf.TensorSpec([], tf.int32),
        }  # fmt: skip
        signature = [element, tf.TensorSpec([], tf.int32)]
        self.train = tf.function(self._train, input_signature=signature)

    def _train(self, data: dict, epochs: tf.Tensor) -> tf.Tensor:
        data = collections.OrderedDict((k, data[k]) for k in _FIELDS)
        trainable = tuple(self.model.trainable_variables)
        for var, value in zip(trainable, self.start):
            var.assign(value)
        specs = tuple(tf.TensorSpec(v.shape, v.dtype) for v in trainable)

        def step(state, batch):  # noqa: ANN001
            opt_state, examples = state
            with tf.GradientTape() as tape:
                loss = self.loss(batch[1], self.model(batch[0], training=True))
            grads = tape.gradient(loss, trainable)
            opt_state, new = self.optimizer.next(opt_state, trainable, grads)
            for var, value in zip(trainable, new):
                var.assign(value)
            return opt_state, examples + tf.shape(batch[1])[0]

        init = (self.optimizer.initialize(specs), tf.constant(0))
        return local_loop.run_epochs(data, epochs, step, init)[1]


def client_values(clients: Sequence[ClientData], seed: int) -> list[dict]:
    return [
        dict(local_loop.client_tensors(c, BATCH, seed + c.client_id).get_single_element())
        for c in clients
    ]


def zero_overhead_round(
    trainers: Sequence[ZeroOverhead], values: Sequence[dict], epochs: int
) -> Callable[[], None]:
    """A callable running every client once: with one trainer the clients one after another,
    with several the clients dealt round-robin to one thread per trainer."""
    e = tf.constant(epochs)

    def run(trainer: ZeroOverhead, part: Sequence[dict]) -> None:
        for v in part:
            trainer.train(v, e)

    def round_() -> None:
        if len(trainers) == 1:
            run(trainers[0], values)
            return
        threads = [
            threading.Thread(target=run, args=(t, values[i :: len(trainers)]))
            for i, t in enumerate(trainers)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    return round_


def paired(base: Callable[[], None], variants: dict, rounds: int) -> tuple[float, dict]:
    """Median time of ``base`` and, per variant, the median of (variant / base right before)."""
    for fn in (base, *variants.values()):
        fn()  # warm-up (tracing)
    base_times, ratios = [], {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            b = _time(base)
            base_times.append(b)
            ratios[name].append(_time(fn) / b)
    return float(np.median(base_times)), {k: float(np.median(v)) for k, v in ratios.items()}


def best_zero_overhead(spec: ModelSpec, optimizer_fn, values, epochs: int) -> tuple:  # noqa: ANN001
    """One loop per core, the clients dealt round-robin; (callable, label, seconds)."""
    cores = min(_cores(), len(values))
    fn = zero_overhead_round(
        [ZeroOverhead(spec, optimizer_fn()) for _ in range(cores)], values, epochs
    )
    fn()
    label = f"{cores} loop(s), one client per core"
    return fn, label, float(np.median([_time(fn) for _ in range(3)]))


def har(args: argparse.Namespace, peak: float) -> float:
    """The HAR CNN's rounds; returns the zero-overhead rate in GFLOP/s."""
    from fedprune.data.registry import load_federated
    from fedprune.engine.client_work import LocalTraining
    from fedprune.engine.clustered import build_clustered_round, run_clustered_round
    from fedprune.engine.process import build_fedavg_process
    from fedprune.engine.rounds import run_round, sample_clients
    from fedprune.sparsity import masks as M
    from fedprune.sparsity.layers import prunable_mask_flags

    data = load_federated("uci_har", seed=0, data_dir=args.data_dir, verbose=False)
    spec = ModelSpec(data.input_shape, data.num_classes, seed=0)
    count = flops.count(spec.keras())
    ids = sample_clients([c.client_id for c in data.clients], 10, 0, 1)
    clients = [data.client(i) for i in ids]
    windows = sum(c.num_train for c in clients) * args.local_epochs
    work = windows * count.training / 1e9
    print(
        f"\nHAR CNN on UCI-HAR windows {data.input_shape}: {count.forward / 1e6:.2f} MFLOP "
        f"forward, {count.training / 1e6:.2f} MFLOP per training window"
    )
    print(
        f"  a round: {len(clients)} clients x E={args.local_epochs}, {windows} windows, "
        f"{work:.1f} GFLOP"
    )
    values = client_values(clients, 0)
    adam = lambda: tff.learning.optimizers.build_adam(1e-3)  # noqa: E731
    zero, label, zero_s = best_zero_overhead(spec, adam, values, args.local_epochs)
    rate = work / zero_s
    print(
        f"  bound: {label}: {zero_s:.2f} s = {rate:.1f} GFLOP/s "
        f"({100 * rate / peak:.0f} % of the sgemm peak)"
    )

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
    fedavg = build_fedavg_process(spec, args.local_epochs)
    fedavg_state = fedavg.initialize()
    training = LocalTraining(args.local_epochs, prox=1e-3, masked=True)
    plain = build_clustered_round(spec, training, len(groups))
    measuring = LocalTraining(**{**vars(training), "statistics": True})
    scoring = build_clustered_round(spec, measuring, len(groups))
    start = {c: M.apply(init, mask) for c in range(len(groups))}
    masks = {c: mask for c in range(len(groups))}
    members = dict(enumerate(groups))
    variants = {
        "fedavg": lambda: run_round(fedavg, fedavg_state, clients, 1, 0, BATCH),
        "caafp": lambda: run_clustered_round(plain, start, masks, init, members, 1, 0, BATCH),
        "scoring": lambda: run_clustered_round(scoring, start, masks, init, members, 1, 0, BATCH),
    }
    zero_s, ratio = paired(zero, variants, args.rounds)
    caafp = (4 * ratio["caafp"] + ratio["scoring"]) / 5
    print("  per round type, paired medians against the zero-overhead round:")
    for name, text in (
        ("fedavg", "TFF FedAvg round"),
        ("caafp", "CA-AFP round (8/1/1 clusters, 70 % masks, prox)"),
        ("scoring", "CA-AFP scoring round (+ gradient pass)"),
    ):
        extra = 1.0 + (1.0 / args.local_epochs if name == "scoring" else 0.0)
        gflops = rate * extra / ratio[name]
        print(f"    {text:48s} {ratio[name]:5.2f}   {gflops:5.1f} GFLOP/s")
    print(f"  FedAvg round / zero-overhead round        {ratio['fedavg']:5.2f}  (target <= 1.15)")
    per_fedavg = caafp / ratio["fedavg"]
    print(f"  CA-AFP round (1 scoring in 5) / FedAvg    {per_fedavg:5.2f}  (target <= 1.10)")
    if args.peer_rounds > 1:
        peer_round_vs_fedavg(args, spec, clients, variants["fedavg"])
    return rate


def peer_round_vs_fedavg(
    args: argparse.Namespace,
    spec: ModelSpec,
    clients: Sequence[ClientData],
    fedavg_round: Callable[[], object],
) -> None:
    """fedprune's FedAvg round against its peer, the same round as a tuned multi-process
    plain-Keras client loop (:mod:`peer_round`): one worker process per core, each with its
    model built and compiled once; the same clients, initial weights, local epochs, batch and
    Adam(1e-3). Interleaved: a fedprune round, then a peer round, ``--peer-rounds`` times;
    the first of each is left out (tracing, the clients' data sent to the workers)."""
    from peer_round import THREAD_VARS, PeerPool

    from fedprune.engine.datasets import round_seed

    init = [np.asarray(w) for w in spec.keras().get_weights()]
    data = [(c.client_id, np.asarray(c.x_train), np.asarray(c.y_train)) for c in clients]
    seeds = [round_seed(0, 1, c.client_id) for c in clients]
    cores = _cores()
    with PeerPool(spec.keras, spec.loss, processes=cores) as pool:

        def peer() -> None:
            pool.round(init, data, seeds, args.local_epochs, BATCH)

        ours, theirs = [], []
        for _ in range(args.peer_rounds):
            ours.append(_time(fedavg_round))
            theirs.append(_time(peer))
    ratios = [a / b for a, b in zip(ours[1:], theirs[1:])]
    threads = " ".join(f"{k}={v}" for k, v in THREAD_VARS.items())
    print(
        f"  peer: {cores} spawned plain-Keras worker process(es) ({threads} each; model "
        f"compiled once per worker, set_weights + fit + get_weights per client); fedprune: "
        f"one TFF worker, TF_NUM_INTRAOP_THREADS={os.environ.get('TF_NUM_INTRAOP_THREADS')} "
        f"TF_NUM_INTEROP_THREADS={os.environ.get('TF_NUM_INTEROP_THREADS')}"
    )
    print(
        f"  FedAvg s/round, rounds 2..{args.peer_rounds}, medians: fedprune "
        f"{np.median(ours[1:]):.2f} s, tuned peer {np.median(theirs[1:]):.2f} s"
    )
    print(
        f"  fedprune round / tuned peer round         {np.median(ratios):5.2f}  (pairs: "
        + ", ".join(f"{r:.2f}" for r in ratios)
        + ")"
    )


def ascfl(args: argparse.Namespace, peak: float) -> None:
    """The AS-CFL family's update round (image CNN, plain SGD) against its zero-overhead round."""
    from fedprune.algorithms.ascfl.experiment import build_federation, model_spec
    from fedprune.configs.ascfl import ClusteredImageConfig
    from fedprune.engine.per_client import build_update_round, run_update_round

    config = ClusteredImageConfig(dataset="mnist", scale="scaled")
    fed = build_federation(config, args.data_dir)
    spec = model_spec(config, fed)
    count = flops.count(spec.keras())
    clients = list(fed.clients)
    epochs = config.local_epochs
    windows = sum(len(c.y_train) for c in clients) * epochs
    work = windows * count.training / 1e9
    print(
        f"\nAS-CFL image CNN ({config.model}) on MNIST {fed.federated.input_shape}: "
        f"{count.forward / 1e6:.2f} MFLOP forward, {count.training / 1e6:.2f} MFLOP per "
        f"training window"
    )
    print(f"  a round: {len(clients)} clients x E={epochs}, {windows} windows, {work:.1f} GFLOP")
    values = client_values(clients, 0)
    sgd = lambda: tff.learning.optimizers.build_sgdm(0.1)  # noqa: E731
    zero, label, zero_s = best_zero_overhead(spec, sgd, values, epochs)
    rate = work / zero_s
    print(
        f"  bound: {label}: {zero_s:.2f} s = {rate:.1f} GFLOP/s "
        f"({100 * rate / peak:.0f} % of the sgemm peak)"
    )
    computation = build_update_round(spec, epochs, 1)
    weights = [[np.asarray(w) for w in spec.initial_weights().trainable]]
    model_of = {c.client_id: 0 for c in clients}

    def update_round() -> None:
        run_update_round(computation, weights, 0.1, model_of, clients, 1, 0, config.batch_size)

    _, ratio = paired(zero, {"update": update_round}, args.rounds)
    print(f"  AS-CFL update round / zero-overhead round {ratio['update']:5.2f}")


def caafp_run(args: argparse.Namespace, rate: float) -> None:
    """One whole CA-AFP UCI-HAR (0,0,50) run in a fresh process with the user's environment:
    its work, its time and their ratio to the bound."""
    import fedprune.api as fp

    with tempfile.TemporaryDirectory(prefix="fedprune-bench-") as out:
        code = (
            "import sys, fedprune.api as fp; "
            "fp.caafp('uci_har').run(sys.argv[1], data_dir=sys.argv[2] or None, progress=False)"
        )
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", code, out, args.data_dir or ""], env=_user_env(), check=True
        )
        process_s = time.perf_counter() - t0
        print("\nOne CA-AFP UCI-HAR (0,0,50) run (fp.caafp('uci_har'), defaults):")
        report_run(fp.open_result(out), rate, args.data_dir)
    print(f"  the whole process, with importing, loading and setting up: {process_s:.1f} s")


def report_run(result: object, rate: float, data_dir: str | None) -> None:
    """A finished pipeline run's work (from its configuration, data and clusters), its time
    and run time / bound."""
    from fedprune.algorithms.pipeline.policies import policy_of
    from fedprune.configs.pipeline import CAAFPConfig
    from fedprune.data.registry import har_recipe, load_recorded
    from fedprune.engine.rounds import sample_by_cluster

    config = types.SimpleNamespace(**result.config)
    fields = {f.name for f in dataclasses.fields(CAAFPConfig)}
    policy = policy_of(CAAFPConfig(**{k: v for k, v in result.config.items() if k in fields}))
    data = load_recorded(har_recipe(config), data_dir)
    spec = ModelSpec(data.input_shape, data.num_classes, seed=config.seed)
    count = flops.count(spec.keras())
    sizes = {c.client_id: c.num_train for c in data.clients}
    tests = sum(len(c.y_test) for c in data.clients)
    t0, t1, t2 = config.phases
    cluster_of = {int(k): int(v) for k, v in result.assignments().items()}
    trained = sum(sizes.values()) if config.clusters > 1 else 0  # the clustering step's epoch
    scored = 0
    for t in range(t0 + 2, t0 + 2 + t1 + t2):
        chosen = sample_by_cluster(cluster_of, config.clients_per_round, config.seed, t)
        windows = sum(sizes[i] for members in chosen.values() for i in members)
        trained += windows * config.local_epochs
        phase3_t = t - (t0 + 1 + t1)
        if phase3_t >= 1 and policy.scoring_round(phase3_t):
            scored += windows
    finetuned = max(config.ft_epochs) * sum(sizes.values())
    total = t0 + 1 + t1 + t2
    every = getattr(config, "eval_every", 0)
    watched = sum(1 for t in range(1, total + 1) if every and (t % every == 0 or t == total))
    evaluated = (len(config.ft_epochs) + watched) * tests  # + the held-out accuracy
    work = (trained + scored + finetuned) * count.training + evaluated * count.forward
    bound = work / 1e9 / rate
    wall = float(result.summary["wall_s"])
    print(
        f"  windows: {trained} in local epochs, {scored} in scoring passes, {finetuned} "
        f"fine-tuned, {evaluated} evaluated: {work / 1e12:.2f} TFLOP"
    )
    print(f"  bound at the zero-overhead rate: {bound:6.1f} s")
    print(f"  run (summary.json wall_s): {wall:6.1f} s = {work / 1e9 / wall:.1f} GFLOP/s")
    print(f"  run time / bound: {wall / bound:5.2f}  (target <= 1.3)")


_THREADS = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")
_RESTARTED = "FEDPRUNE_BENCH_USER_THREADS"


def _restart_with_one_thread_per_client() -> None:
    """Re-run this script with one intra-op thread and one inter-op thread per core (TF reads
    them once, at start-up); the user's own values are kept for the whole run."""
    if _RESTARTED in os.environ:
        return
    env = dict(os.environ)
    env[_RESTARTED] = ",".join(os.environ.get(k, "") for k in _THREADS)
    env["TF_NUM_INTRAOP_THREADS"] = "1"
    env["TF_NUM_INTEROP_THREADS"] = str(_cores())
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def _user_env() -> dict[str, str]:
    """The environment this benchmark was started with."""
    env = dict(os.environ)
    for key, value in zip(_THREADS, env.pop(_RESTARTED, ",").split(",")):
        if value:
            env[key] = value
        else:
            env.pop(key, None)
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--local-epochs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5, help="paired repetitions (default 5)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--no-run", action="store_true", help="skip the whole CA-AFP run")
    parser.add_argument("--no-ascfl", action="store_true", help="skip the AS-CFL image CNN")
    parser.add_argument(
        "--peer-rounds",
        type=int,
        default=4,
        help="FedAvg rounds of fedprune and of the multi-process Keras peer, interleaved; "
        "the first of each is left out (default 4; 0: no peer)",
    )
    args = parser.parse_args()
    _restart_with_one_thread_per_client()

    from fedprune.workers import execution

    cores = _cores()
    one, every, tf_peak = sgemm_gflops(1), sgemm_gflops(None), tf_matmul_gflops()
    peak = max(every, tf_peak)
    print(f"{cpu_name()} ({vector_units()}), {cores} cores, oneDNN {onednn()}")
    print(
        f"sgemm, float32 2048^3: numpy {one:.0f} GFLOP/s on one core, {every:.0f} on all; "
        f"TensorFlow's matmul, one per core at once, {tf_peak:.0f}: peak {peak:.0f} GFLOP/s"
    )
    execution.install()
    try:
        rate = har(args, peak)
        if not args.no_ascfl:
            ascfl(args, peak)
        if not args.no_run:
            caafp_run(args, rate)
    finally:
        execution.shutdown()


def _time(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
