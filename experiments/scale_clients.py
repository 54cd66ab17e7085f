"""How CA-AFP's cost grows with the number of clients: time and peak memory per phase.

Each size N runs in its own fresh process (so that peak memory is that run's), through the
public API as a user runs it: ``fp.from_arrays`` on synthetic windows (40 windows of 64 x 3
per client, six classes; each class a sine of its own frequency plus noise), then
``fp.caafp(data, phases=(0, 0, 3), clients_per_round=10, ft_epochs=(1,), prune_frequency=3)
.run(out)`` with the built-in HAR CNN and every other setting at its default.

The phases are timed where the library enters them (the functions named in ``PHASES``);
the time outside them (starting TFF's worker, tracing, the Phase-3 rounds of 10 clients,
writing the run directory) is ``other``. Memory is sampled every 50 ms: the resident set
(RSS) of the training process and, separately, of its children (TFF's worker processes),
the peak of each while the phase ran; the last row gives the training process's true peak
(``getrusage``'s ``ru_maxrss``) and the children's sampled peak.

``--bound`` also measures the fine-tuning's zero-overhead bound on the same clients: each
client's epoch (batch 32, Adam) as one ``tf.while_loop`` in one ``tf.function``, one client per
core at a time, no fedprune around it (``experiments/bench_round.py``'s ``ZeroOverhead``),
and prints the fine-tuning's seconds per client-epoch against it.

A size whose process grows past ``--rss-cap-gb`` (training process plus children) is stopped
there and reported as such, so that a run that would not fit does not take the machine down.

    python experiments/scale_clients.py                          # N = 30, 300, 3000
    python experiments/scale_clients.py --clients 30,300 --bound --json scale.json
    python experiments/scale_clients.py --clients 10000 --rss-cap-gb 20
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

WINDOWS, STEPS, CHANNELS, CLASSES = 40, 64, 3, 6
PHASES_OPTION = (0, 0, 3)
CLIENTS_PER_ROUND = 10
SAMPLE_S = 0.05

# (phase label, module, attribute): the functions and methods where each phase starts
PHASES = (
    ("clustering signal, every client", "fedprune.engine.updates", "one_epoch_updates"),
    ("held-out accuracy, every client", "fedprune.engine.held_out", "HeldOut.accuracy"),
    ("fine-tuning, all", "fedprune.algorithms.caafp.finetune", "finetune_all"),
    ("  setting up the stack", "fedprune.engine.stacked", "StackedModel.__init__"),
    ("  training", "fedprune.engine.stacked", "StackedModel.fit_epochs"),
    ("  evaluating", "fedprune.engine.stacked", "predict_each"),
    ("writing personal models", "fedprune.runs.artefacts", "write_personal_models"),
)


def synthetic_windows(clients: int, seed: int = 0) -> tuple:
    """(x, y, client ids): WINDOWS windows of STEPS x CHANNELS per client; window i of class
    y is sin(2 pi f_y t + phase) on every channel (f_y = (y + 1) / 16 cycles per step, a
    random phase per channel) plus Gaussian noise of standard deviation 0.5."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = clients * WINDOWS
    y = rng.integers(0, CLASSES, n)
    t = np.arange(STEPS, dtype=np.float32)
    phase = rng.uniform(0, 2 * np.pi, (n, 1, CHANNELS)).astype(np.float32)
    freq = ((y + 1) / 16.0).astype(np.float32)[:, None, None]
    x = np.sin(2 * np.pi * freq * t[None, :, None] + phase)
    x += rng.normal(0, 0.5, x.shape).astype(np.float32)
    return x.astype(np.float32), y, np.repeat(np.arange(clients), WINDOWS)


class Phases:
    """Wall time and sampled peak RSS (self, children) of each phase, entered through the
    wrapped functions; nested phases count in their parents too."""

    def __init__(self, partial: Path | None = None) -> None:
        import psutil

        self.partial = partial  # the table so far, rewritten whenever a phase ends
        self.process = psutil.Process()
        self.active: list[str] = []
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.peak: dict[str, list[int]] = {}
        self.start_rss: dict[str, int] = {}
        self.peak_children = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def rss(self) -> tuple[int, int]:
        own = self.process.memory_info().rss
        children = 0
        for child in self.process.children(recursive=True):
            with contextlib.suppress(Exception):
                children += child.memory_info().rss
        return own, children

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            with contextlib.suppress(Exception):
                own, children = self.rss()
                with self._lock:
                    self.peak_children = max(self.peak_children, children)
                    for name in self.active:
                        peak = self.peak[name]
                        peak[0], peak[1] = max(peak[0], own), max(peak[1], children)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        own, children = self.rss()
        with self._lock:
            self.active.append(name)
            self.peak.setdefault(name, [own, children])
            self.start_rss.setdefault(name, own)
        t0 = time.perf_counter()
        try:
            yield
        finally:
            seconds = time.perf_counter() - t0
            own, children = self.rss()
            with self._lock:
                self.active.remove(name)
                peak = self.peak[name]
                peak[0], peak[1] = max(peak[0], own), max(peak[1], children)
                self.seconds[name] = self.seconds.get(name, 0.0) + seconds
                self.calls[name] = self.calls.get(name, 0) + 1
            if self.partial is not None:
                from fedprune.runs.files import write_json

                write_json(self.partial, {"phases": self.rows()}, sort_keys=False)

    def rows(self) -> list[dict]:
        """One row per phase entered so far, in ``PHASES`` order."""
        rows = []
        labels = ("synthetic data, from_arrays", *[p for p, _, _ in PHASES], "run, total")
        with self._lock:
            for label in labels:
                if label in self.seconds:
                    own, children = self.peak[label]
                    rows.append(
                        {
                            "phase": label,
                            "seconds": round(self.seconds[label], 2),
                            "calls": self.calls[label],
                            "peak_rss_mb": round(own / 2**20),
                            "peak_children_rss_mb": round(children / 2**20),
                            "rss_at_start_mb": round(self.start_rss[label] / 2**20),
                        }
                    )
        return rows

    def wrap(self, label: str, module_name: str, attribute: str) -> None:
        """Time ``module.attribute`` (a function, or ``Class.method``) as phase ``label``,
        also where another fedprune module imported the function by name."""
        module = importlib.import_module(module_name)
        owner, name = module, attribute
        if "." in attribute:
            cls, name = attribute.split(".")
            owner = getattr(module, cls)
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            with self.phase(label):
                return original(*args, **kwargs)

        setattr(owner, name, timed)
        if owner is module:
            for other in list(sys.modules.values()):
                if getattr(other, "__name__", "").startswith("fedprune") and (
                    getattr(other, name, None) is original
                ):
                    setattr(other, name, timed)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def measure(
    clients: int, seed: int, progress: bool, partial: Path | None = None, clusters: str = ""
) -> dict:
    """One CA-AFP run on ``clients`` synthetic clients in this process; its phases.
    ``clusters``: CA-AFP's ``clusters`` ("": its default, K = 3; 1 skips the clustering
    pass; ``auto``: K chosen from the clustering pass)."""
    import numpy as np

    import fedprune.api as fp

    # the modules whose functions are timed, imported before the run so the wrappers stick
    for module in {m for _, m, _ in PHASES} | {"fedprune.algorithms.pipeline.compose"}:
        importlib.import_module(module)
    phases = Phases(partial)
    for label, module, attribute in PHASES:
        phases.wrap(label, module, attribute)
    t_start = time.perf_counter()
    with phases.phase("synthetic data, from_arrays"):
        x, y, ids = synthetic_windows(clients, seed)
        data = fp.from_arrays(x, y, ids)
        del x, ids
        # the time-ordered split trains on 4n // 5 of a client's n windows of a class (n >= 2)
        _, per_class = np.unique(ids_y := np.stack([data.subject, y]), axis=1, return_counts=True)
        train_windows = int(np.where(per_class >= 2, 4 * per_class // 5, per_class).sum())
        del y, ids_y
    with tempfile.TemporaryDirectory(prefix="fedprune-scale-") as out:
        trainer = fp.caafp(
            data,
            phases=PHASES_OPTION,
            clients_per_round=CLIENTS_PER_ROUND,
            ft_epochs=(1,),
            prune_frequency=PHASES_OPTION[2],  # one scoring round (5 is more than T2 = 3)
            **(
                {}
                if not clusters
                else {"clusters": clusters if clusters == "auto" else int(clusters)}
            ),
            seed=seed,
        )
        with phases.phase("run, total"):
            result = trainer.run(Path(out) / "run", progress=progress)
        summary = result.summary
    total = time.perf_counter() - t_start
    phases.close()
    top = [label for label, _, _ in PHASES if not label.startswith(" ")]
    other = phases.seconds["run, total"] - sum(phases.seconds.get(p, 0.0) for p in top)
    return {
        "clients": clients,
        "seconds": round(total, 1),
        "other_seconds": round(other, 1),
        "phases": phases.rows(),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "peak_children_rss_mb": round(phases.peak_children / 2**20),
        "clusters": len(summary["clusters"]),
        "finetune_avg_acc": summary["finetune"]["1"]["avg_acc"],
        "train_windows": train_windows,
        "finetune_epochs": 1,
    }


def zero_overhead_bound(clients: int, seed: int, pairs: int = 5) -> dict:
    """Fine-tuning's seconds per client-epoch on ``clients`` synthetic clients, stacked as
    fine-tuning trains them (:class:`~fedprune.engine.stacked.StackedModel`, 70 % random
    masks) and in the zero-overhead loop (bench_round's ``ZeroOverhead``: Adam 1e-3, batch
    32, one client per core at a time, no masks), timed in ``pairs`` alternating pairs after
    a warm-up of each (the tracing, timed apart); the ratio is the median of the pairs'."""
    import numpy as np
    import tensorflow_federated as tff

    sys.path.insert(0, str(Path(__file__).parent))
    from bench_round import best_zero_overhead, client_values

    import fedprune.api as fp
    from fedprune.data.partition import partition_by_subject
    from fedprune.engine.stacked import StackedModel
    from fedprune.models import flops
    from fedprune.models.spec import ModelSpec
    from fedprune.sparsity import masks as M
    from fedprune.sparsity.layers import kernel_flags, select

    x, y, ids = synthetic_windows(clients, seed)
    data = partition_by_subject(fp.from_arrays(x, y, ids), seed)  # the run's split
    spec = ModelSpec(data.input_shape, data.num_classes, seed)
    values = client_values(list(data.clients), seed)
    adam = lambda: tff.learning.optimizers.build_adam(1e-3)  # noqa: E731
    zero, label, _ = best_zero_overhead(spec, adam, values, 1)
    weights = spec.keras().get_weights()
    rng = np.random.default_rng(seed)
    kernels = select(weights, kernel_flags(spec))
    scores = [rng.random(k.shape) for k in kernels]
    masks = M.prune_to([np.ones_like(k) for k in kernels], scores, 0.7)
    stack = StackedModel(spec.keras(), [weights] * clients, [masks] * clients)
    shuffles = [np.random.default_rng(c) for c in range(clients)]
    xs, ys = [c.x_train for c in data.clients], [c.y_train for c in data.clients]
    t0 = time.perf_counter()
    stack.fit_epochs(xs, ys, 1, 32, shuffles)  # traces the step
    first = time.perf_counter() - t0
    zero_s, stacked_s = [], []
    for _ in range(pairs):
        t0 = time.perf_counter()
        zero()
        zero_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        stack.fit_epochs(xs, ys, 1, 32, shuffles)
        stacked_s.append(time.perf_counter() - t0)
    windows = int(sum(c.num_train for c in data.clients))
    training = flops.count(spec.keras()).training
    return {
        "clients": clients,
        "loop": label,
        "group": getattr(stack, "group", clients),  # one stack of all before groups
        "zero_overhead_ms_per_client_epoch": 1e3 * float(np.median(zero_s)) / clients,
        "stacked_ms_per_client_epoch": 1e3 * float(np.median(stacked_s)) / clients,
        "stacked_first_epoch_s": first,
        "ratio": float(np.median(np.array(stacked_s) / np.array(zero_s))),
        "zero_overhead_gflops": windows * training / float(np.median(zero_s)) / 1e9,
        "windows_per_client": windows / clients,
    }


def run_child(arguments: list[str], cap_gb: float, log: Path) -> dict:
    """This script in a fresh process; stopped if it (with its children) passes ``cap_gb``."""
    import psutil

    partial = log.with_suffix(".partial.json")
    command = [sys.executable, __file__, *arguments, "--partial", str(partial)]
    with open(log, "w") as err:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True)
        proc, peak, capped, t0 = psutil.Process(child.pid), 0, False, time.perf_counter()
        while child.poll() is None:
            with contextlib.suppress(psutil.Error):
                rss = proc.memory_info().rss + sum(
                    c.memory_info().rss for c in proc.children(recursive=True)
                )
                peak = max(peak, rss)
                if rss > cap_gb * 2**30:
                    capped = True
                    for c in proc.children(recursive=True):
                        with contextlib.suppress(psutil.Error):
                            c.kill()
                    child.kill()
            time.sleep(0.2)
        stdout = child.stdout.read()
    if capped:
        done = json.loads(partial.read_text())["phases"] if partial.exists() else []
        return {"capped_gb": cap_gb, "after_s": round(time.perf_counter() - t0, 1),
                "last_progress": _last_line(log), "phases": done}  # fmt: skip
    if child.returncode != 0:
        raise SystemExit(f"scale_clients: {' '.join(arguments)} failed; see {log}")
    return json.loads(stdout.strip().splitlines()[-1])


def _last_line(log: Path) -> str:
    """The last progress bar's last state in a child's stderr."""
    text = log.read_text(errors="replace").replace("\r", "\n")
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][-160:] if lines else ""


def print_report(report: dict) -> None:
    if "capped_gb" in report:
        print(
            f"\nN = {report['clients']}: stopped at {report['capped_gb']} GB (training process "
            f"+ workers) after {report['after_s']} s; last progress: {report['last_progress']}"
        )
        _print_phases(report["phases"])
        return
    print(
        f"\nN = {report['clients']} clients ({report['train_windows']} training windows, "
        f"{report['clusters']} clusters): {report['seconds']} s, peak RSS "
        f"{report['peak_rss_mb']} MB training process + {report['peak_children_rss_mb']} MB "
        f"TFF workers; fine-tuned accuracy {report['finetune_avg_acc']:.3f}"
    )
    _print_phases(report["phases"])
    print(f"  {'other (worker start, tracing, rounds)':36s}{report['other_seconds']:9.1f}")


def _print_phases(rows: list[dict]) -> None:
    print(f"  {'phase (finished calls)':36s}{'s':>9}{'peak MB':>9}{'(start)':>9}{'workers MB':>11}")
    for row in rows:
        print(
            f"  {row['phase']:36s}{row['seconds']:9.2f}{row['peak_rss_mb']:9d}"
            f"{row['rss_at_start_mb']:9d}{row['peak_children_rss_mb']:11d}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default="30,300,3000", help="sizes N (30,300,3000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--clusters",
        default="",
        help="CA-AFP's --clusters (default: its own, 3; 1: no clustering pass)",
    )
    parser.add_argument("--bound", action="store_true", help="also the zero-overhead bound")
    parser.add_argument("--bound-clients", type=int, default=128, help="clients for --bound")
    parser.add_argument("--rss-cap-gb", type=float, default=16.0, help="stop a size past this")
    parser.add_argument("--progress", action="store_true", help="progress bars (stderr log)")
    parser.add_argument("--json", type=Path, help="write every report here too")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-bound", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--partial", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    try:
        sizes = [int(n) for n in args.clients.split(",")]
    except ValueError:
        parser.error(f"--clients: comma-separated integers, not {args.clients!r}")
    if min(sizes) < 3:
        parser.error("--clients: every size needs at least 3 clients (--clusters auto)")
    if args.clusters not in ("", "auto") and not (
        args.clusters.isdigit() and int(args.clusters) >= 1
    ):
        parser.error(f"--clusters: auto or an integer >= 1, not {args.clusters!r}")
    if args.child is not None:
        report = measure(args.child, args.seed, args.progress, args.partial, args.clusters)
        print(json.dumps(report))
        return
    if args.child_bound is not None:
        print(json.dumps(zero_overhead_bound(args.child_bound, args.seed)))
        return

    from edge_export.verify import cpu_name
    from fedprune.runs.files import write_json

    print(f"{cpu_name()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(
        f"CA-AFP, phases {PHASES_OPTION}, clusters {args.clusters or 'default'}, "
        f"{CLIENTS_PER_ROUND} clients per round, 1 fine-tuning epoch; {WINDOWS} synthetic "
        f"windows of {STEPS}x{CHANNELS} per client"
    )
    logs = Path(tempfile.mkdtemp(prefix="fedprune-scale-logs-"))
    reports: dict = {"cpu": cpu_name(), "sizes": []}
    bound = None
    if args.bound:
        bound = run_child(
            ["--child-bound", str(args.bound_clients), "--seed", str(args.seed)],
            args.rss_cap_gb,
            logs / "bound.log",
        )
        reports["bound"] = bound
        print(
            f"fine-tuning, {args.bound_clients} clients, paired: zero-overhead ({bound['loop']}) "
            f"{bound['zero_overhead_ms_per_client_epoch']:.2f} ms per client-epoch "
            f"({bound['zero_overhead_gflops']:.1f} GFLOP/s), stacked (groups of "
            f"{bound['group']}) {bound['stacked_ms_per_client_epoch']:.2f} ms: "
            f"{bound['ratio']:.2f}x (first stacked epoch, with tracing: "
            f"{bound['stacked_first_epoch_s']:.1f} s)"
        )
    for n in sizes:
        extra = ["--progress"] if args.progress else []
        report = run_child(
            ["--child", str(n), "--seed", str(args.seed), "--clusters", args.clusters, *extra],
            args.rss_cap_gb,
            logs / f"n{n}.log",
        )
        report["clients"] = n
        reports["sizes"].append(report)
        print_report(report)
        training = next((r for r in report.get("phases", ()) if r["phase"] == "  training"), None)
        if training and bound:
            per = training["seconds"] / (n * report["finetune_epochs"])
            ratio = per / (bound["zero_overhead_ms_per_client_epoch"] / 1e3)
            print(
                f"  fine-tuning: {1e3 * per:.2f} ms per client-epoch with its one-time tracing "
                f"= {ratio:.1f}x the zero-overhead bound measured above"
            )
        if args.json:
            write_json(args.json, reports, sort_keys=False)
    print(f"\nlogs: {logs}")


if __name__ == "__main__":
    main()
