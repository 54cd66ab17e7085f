"""Benchmark: a client's int8 TFLite Micro project on a Cortex-M4 (QEMU), CMSIS-NN against
TFLM's reference kernels.

Trains a short FedAvg run on UCI-HAR (or takes ``--run``), exports client 1 as ``int8`` with
``--micro``, then builds the project three times: on the host (TFLM's reference kernels), and
cross-built for ``cortex-m4`` with CMSIS-NN and with the reference kernels, the last two run on
QEMU's ``mps2-an386`` board. It checks, and exits 1 where one fails:

* every build prints ``matched N of N`` and the three builds' int8 outputs are equal bit for
  bit (the reference kernels on the Cortex-M4 compute what they compute on the host);
* CMSIS-NN takes fewer than half the reference kernels' instructions per inference
  (``-icount``), and its firmware holds the Cortex-M4 DSP instruction ``smlad``, the reference
  build's none.

It prints both builds' instructions per inference, their ratio and the firmware's flash and
RAM. ``tests/edge_export/test_cortex_m.py`` checks the CMSIS-NN build against the host binary
and the TFLite Micro interpreter in ``make test``; the reference-kernel cross build, a second
TFLM library for the Cortex-M4, is this script's.

    python experiments/bench_cortex_m.py                       # ../shared/data, ../shared/tflm
    python experiments/bench_cortex_m.py --run runs/fedavg-s0 --data-dir data

Needs gcc-arm-none-eabi, libnewlib-arm-none-eabi, libstdc++-arm-none-eabi-newlib and
qemu-system-arm (``.ci/install-cortex-m.sh``), and the TFLM and CMSIS trees of ``../shared/tflm``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
CLIENT = "1"
IDENT = f"client{CLIENT}_int8"


def _disassembly(elf: Path) -> str:
    command = ["arm-none-eabi-objdump", "-d", str(elf)]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def _train(work: Path, data_dir: Path) -> Path:
    from fedprune.cli import main as fedprune

    run = work / "run"
    args = ["train", "fedavg", "--dataset", "uci_har", "--rounds", "2", "--seed", "0"]
    args += ["--clients-per-round", "5", "--local-epochs", "1"]
    if fedprune([*args, "--out", str(run), "--data-dir", str(data_dir), "--no-progress"]) != 0:
        raise SystemExit("bench_cortex_m: the FedAvg run failed")
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, help="a finished run (default: train a short one)")
    default_data = os.environ.get("FEDPRUNE_DATA_DIR") or str(SHARED / "data")
    parser.add_argument("--data-dir", type=Path, default=Path(default_data))
    parser.add_argument("--tflm-dir", type=Path, default=SHARED / "tflm" / "tree")
    parser.add_argument("--cmsis-dir", type=Path, default=SHARED / "tflm" / "cmsis")
    parser.add_argument("--cache-dir", type=Path, help="TFLM object cache (default: the user's)")
    args = parser.parse_args(argv)

    from edge_export.cli import main as edge_export
    from edge_export.micro.build import build_project
    from edge_export.micro.cortex_m import measure_cortex_m, missing_tools

    missing = missing_tools()
    if missing:
        raise SystemExit(f"bench_cortex_m: no {', '.join(missing)} (.ci/install-cortex-m.sh)")
    with tempfile.TemporaryDirectory(prefix="bench-cortex-m-") as tmp:
        work = Path(tmp)
        run = args.run or _train(work, args.data_dir)
        out = work / "export"
        export = [str(run), "--clients", CLIENT, "--formats", "int8", "--micro", "--out", str(out)]
        if edge_export([*export, "--data-dir", str(args.data_dir), "--no-progress"]) != 0:
            raise SystemExit("bench_cortex_m: edge-export failed")
        (entry,) = json.loads((out / "export_report.json").read_text())
        project = out / entry["micro_project"]
        cache = args.cache_dir
        host = build_project(project, args.tflm_dir, cache_dir=cache).run
        results = {
            kernels: measure_cortex_m(
                project, args.tflm_dir, args.cmsis_dir, IDENT, "cortex-m4", kernels, cache
            )
            for kernels in ("cmsis-nn", "reference")
        }
    failures = []
    if host.matched != host.total:
        failures.append(f"host: matched {host.matched} of {host.total}")
    for kernels, result in results.items():
        run_ = result.run
        if run_.returncode != 0 or run_.matched != run_.total:
            failures.append(f"cortex-m4 {kernels}: matched {run_.matched} of {run_.total}")
        elif not np.array_equal(np.stack(run_.outputs), np.stack(host.outputs)):
            failures.append(f"cortex-m4 {kernels}: outputs differ from the host binary's")
    cmsis, reference = results["cmsis-nn"], results["reference"]
    ratio = reference.instructions_per_inference / cmsis.instructions_per_inference
    if not ratio > 2:
        failures.append(f"CMSIS-NN saves only {ratio:.2f}x the reference kernels' instructions")
    if "smlad" not in _disassembly(cmsis.build_dir / "firmware.elf"):
        failures.append("no smlad in the CMSIS-NN firmware")
    if "smlad" in _disassembly(reference.build_dir / "firmware.elf"):
        failures.append("smlad in the reference-kernel firmware")

    print(f"cortex-m4, client {CLIENT} int8, {host.total} test vectors")
    print(f"{'kernels':<10} {'M instructions':>15} {'flash KB':>9} {'RAM KB':>7}  outputs")
    for kernels, result in results.items():
        same = np.array_equal(np.stack(result.run.outputs), np.stack(host.outputs))
        print(
            f"{kernels:<10} {result.instructions_per_inference / 1e6:>15.2f} "
            f"{result.firmware.flash / 1024:>9.1f} {result.firmware.ram / 1024:>7.1f}  "
            f"{'= host, bit for bit' if same else 'DIFFER from the host'}"
        )
    print(f"reference / CMSIS-NN instructions: {ratio:.1f}x")
    for failure in failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
