"""Benchmark: where the one-time cost of a short FedAvg run goes, against plain Keras.

Runs, each in a fresh process and alternating (``--pairs`` pairs, medians reported):

* ``fedprune train fedavg --dataset uci_har --rounds 5 --clients-per-round 10 --seed 0``, the
  command a user types, with timers wrapped around the steps it takes (importing TensorFlow,
  importing TFF, starting the TFF worker, loading the data, building the round computations,
  each round, the held-out and final evaluations);
* ``experiments/startup_peer.py``: the same training (same clients per round, local epochs,
  batch and Adam settings, FedAvg weighted by examples) as a plain Keras script in one
  process.

For both it prints the process's whole wall time, the one-time cost (the whole time less the
rounds after the first at their median, i.e. everything but steady-state training) and the
ratio fedprune / plain Keras of each.

    python experiments/bench_startup.py                # 3 pairs, real data
    python experiments/bench_startup.py --pairs 1 --importtime
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# Runs inside the measured process: wraps the steps of a FedAvg run with timers, then runs the
# command line exactly as `fedprune train` does. Times are seconds since the process started.
_DRIVER = r"""
import json, os, sys, time
T0 = float(os.environ["FEDPRUNE_BENCH_T0"])
marks = []
def mark(name, began):
    marks.append((name, began - T0, time.time() - began))
def timed(owner, attr, name):
    fn = getattr(owner, attr)
    def wrapper(*a, **k):
        began = time.time()
        try:
            return fn(*a, **k)
        finally:
            mark(name, began)
    setattr(owner, attr, wrapper)
marks.append(("interpreter start", 0.0, time.time() - T0))
began = time.time()
import fedprune.cli as cli
mark("import fedprune.cli", began)
import builtins
seen, patched = set(), set()
_orig_import = builtins.__import__
def patch_loaded():
    # wrap the steps once their modules are loaded, where the command loads them
    m = sys.modules
    if "execution" not in patched and hasattr(m.get("fedprune.workers.execution"), "shutdown"):
        patched.add("execution")
        timed(m["fedprune.workers.execution"], "install", "TFF worker start (execution.install)")
    if "fedavg" not in patched and "fedprune.algorithms.fedavg" in m:
        fa = m["fedprune.algorithms.fedavg"]
        if hasattr(fa, "FedAvgRun") and hasattr(fa, "run_fedavg"):  # the module is loaded
            patched.add("fedavg")
            timed(m["fedprune.engine.har_run"], "load_recorded", "data loading")
            timed(fa, "build_fedavg_process", "building the round computation")
            timed(fa.FedAvgRounds, "__init__", "setting up the rounds (incl. building)")
            timed(fa, "run_round", "round")
            timed(fa, "client_accuracies", "final client accuracies")
            timed(m["fedprune.engine.held_out"].HeldOut, "accuracy", "held-out accuracy")
def _import(name, *a, **k):
    top = name.split(".")[0]
    if top in ("tensorflow", "tensorflow_federated") and top not in seen and top not in sys.modules:
        seen.add(top)
        began = time.time()
        try:
            return _orig_import(name, *a, **k)
        finally:
            mark("import " + top + " (first)", began)
    try:
        return _orig_import(name, *a, **k)
    finally:
        if len(patched) < 2:
            patch_loaded()
builtins.__import__ = _import
code = cli.main(sys.argv[1:])
with open(os.environ["FEDPRUNE_BENCH_MARKS"], "w") as f:
    json.dump(marks, f)
sys.exit(code)
"""


def _run(argv: list[str], env: dict, marks: Path) -> tuple[float, list]:
    env = {**env, "FEDPRUNE_BENCH_MARKS": str(marks), "FEDPRUNE_BENCH_T0": repr(time.time())}
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if done.returncode:
        tail = done.stderr.decode(errors="replace")[-3000:]
        sys.exit(f"{argv[-1]}: the measured command failed:\n{tail}")
    wall = time.perf_counter() - t0
    return wall, json.loads(marks.read_text())


def fedprune_once(args: argparse.Namespace, work: Path, i: int) -> dict:
    out = work / f"fedavg-{i}"
    argv = [sys.executable, *(["-X", "importtime"] if args.importtime else []), "-c", _DRIVER]
    argv += ["train", "fedavg", "--dataset", "uci_har", "--rounds", str(args.rounds)]
    argv += ["--clients-per-round", "10", "--seed", "0", "--no-progress", "--out", str(out)]
    wall, marks = _run(argv, dict(os.environ), work / f"marks-f{i}.json")
    return _summarize(wall, marks)


def peer_once(args: argparse.Namespace, work: Path, i: int) -> dict:
    argv = [sys.executable, str(HERE / "startup_peer.py"), "--rounds", str(args.rounds)]
    wall, marks = _run(argv, dict(os.environ), work / f"marks-p{i}.json")
    return _summarize(wall, marks)


def _summarize(wall: float, marks: list) -> dict:
    steps: dict[str, float] = {}
    rounds = []
    for name, _at, seconds in marks:
        if name == "round":
            rounds.append(seconds)
        elif name != "interpreter start":
            steps[name] = steps.get(name, 0.0) + seconds
    start = next((s for n, _a, s in marks if n == "interpreter start"), 0.0)
    # TensorFlow imported from within TFF's import: TFF's own share is the difference
    at = {n: (a, s) for n, a, s in marks}
    tf_, tff_ = at.get("import tensorflow (first)"), at.get("import tensorflow_federated (first)")
    if tf_ and tff_ and tff_[0] <= tf_[0] and tf_[0] + tf_[1] <= tff_[0] + tff_[1]:
        steps["import tensorflow_federated (first)"] -= tf_[1]
    if len(rounds) < 2:  # a one-time cost without timed rounds would be the whole run
        sys.exit(
            f"{len(rounds)} round(s) timed: the driver's hooks no longer match fedprune's modules"
        )
    steady = sorted(rounds[1:])[len(rounds[1:]) // 2]
    later = sum(rounds[1:])
    return {
        "wall": wall,
        "interpreter start": start,
        "steps": steps,
        "first round": rounds[0] if rounds else 0.0,
        "later rounds": later,
        "steady round": steady,
        # everything but the rounds after the first, each counted at the median round
        "one-time": wall - steady * (len(rounds) - 1),
    }


def _median(values: list[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def cpu() -> str:
    try:
        info = open("/proc/cpuinfo").read()
    except OSError:
        return "unknown CPU"
    name = next(
        (ln.split(":", 1)[1].strip() for ln in info.splitlines() if "model name" in ln), "?"
    )
    flags = next((ln for ln in info.splitlines() if ln.startswith("flags")), "")
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    extra = " + AMX" if "amx_tile" in flags else ""
    return f"{name}, {isa}{extra}, {os.cpu_count()} CPUs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--importtime", action="store_true", help="python -X importtime (slower)")
    parser.add_argument("--json", help="write every measurement here")
    args = parser.parse_args()
    fed, peer = [], []
    with tempfile.TemporaryDirectory(prefix="fedprune-startup-") as tmp:
        work = Path(tmp)
        for i in range(args.pairs):
            fed.append(fedprune_once(args, work, i))
            peer.append(peer_once(args, work, i))
    print(f"{cpu()}; load average {open('/proc/loadavg').read().split()[:3]}")
    print(f"FedAvg UCI-HAR, {args.rounds} rounds of 10 clients, medians of {args.pairs} pair(s):")
    for label, runs in (("fedprune train fedavg", fed), ("plain Keras (startup_peer.py)", peer)):
        print(f"  {label}:")
        start = _median([r["interpreter start"] for r in runs])
        print(f"    {'interpreter start':58s} {start:6.2f} s")
        for name in runs[0]["steps"]:
            value = _median([r["steps"].get(name, 0.0) for r in runs])
            print(f"    {name:58s} {value:6.2f} s")
        for key in ("first round", "steady round", "one-time", "wall"):
            print(f"    {key:58s} {_median([r[key] for r in runs]):6.2f} s")
    for key in ("wall", "one-time"):
        ratios = [f[key] / p[key] for f, p in zip(fed, peer)]
        print(
            f"  fedprune / plain Keras, {key:9s}: {_median(ratios):.2f} (pairs: "
            + ", ".join(f"{r:.2f}" for r in ratios)
            + ")"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"fedprune": fed, "peer": peer}, indent=1))


if __name__ == "__main__":
    main()
