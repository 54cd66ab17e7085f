"""``fedprune reproduce device``: what pruning costs in accuracy and what it buys on the device.

Not a paper's table: fedprune's own study on Table 2's CA-AFP cells (UCI-HAR and WISDM,
phases (0, 0, 50), time-ordered split, personal models fine-tuned 3 and 25 epochs; the
arguments of :data:`fedprune.reproduce.table2.ROWS`' ``caafp_0_0_50``), five seeds, for
five settings (:data:`SETTINGS`):

* the paper's model (``har_cnn``) with the paper's per-weight masks at 70 % (fedprune's
  default, Table 2's run itself);
* the paper's model with structured masks (``--structure filters``: whole convolution
  filters and dense units, each layer pruned on its own, ``--budget layerwise``, the default
  with filters) at 50, 70 and 85 % of the units, starting at that fraction as the paper's
  70 % does (``--start-sparsity`` = ``--target-sparsity``);
* the small model (``--model har_cnn_small``) with the paper's masks at 70 %.

After training, every run is exported (:func:`after_run`) with the edge-export command:
each client's personal model after the run's longest fine-tuning (25 epochs) as an ``int8``
file (``--micro``: with its TFLite Micro project and measured tensor arena), run by LiteRT's
default interpreter on the client's test windows, into ``<out>/exports/<run>/``. Where an
Arm cross toolchain, QEMU and a TFLite Micro tree with CMSIS-NN are found
(:func:`cortex_m_trees`), a second export builds the projects for a Cortex-M4 and counts
the instructions per inference under QEMU (``<out>/exports/<run>-cortex-m4/``); otherwise
the table says what is missing, and a Cortex-M build that fails is named in the table with
its log (the other columns stand; the next invocation tries it again). An export that has
its report is kept, as a finished run is; an interrupted one is made again.

Interpretations:

* **Per run**, each device number is the median over the clients' files: file size, the
  TFLite Micro arena (the measured minimum, without the headroom the projects add), LiteRT's
  time per window (1 thread, the median of each file's invokes, every run's files timed
  again together in one interleaved pass once all are exported: :func:`time_exports`); the
  instructions per inference of the CMSIS-NN build. The instructions depend on the layer
  shapes only, so one client per distinct compacted model is built (the first; with
  per-weight masks every client has the same shapes) and every client of that shape counts
  it. A table cell is the mean (± population std) of the runs' values over the seeds, as its
  accuracy is.
* The device numbers are the 25-epoch models'; fine-tuning keeps the masks, so the 3-epoch
  models have the same shapes, files and arenas: the rows of both lengths show them.
  ``int8 acc`` (the int8 files' accuracy on the clients' test windows, mean over the
  clients) is the exported length's only.
* An int8 file stores every weight, pruned or not (``int8-sparse`` keeps the sparse ones,
  and LiteRT and TFLite Micro run it densely: docs/edge-export.md), so the per-weight row's
  device cost is the dense model's: the goal (:func:`claims`) compares with it.
* The Pareto front (per dataset and fine-tuning length): the settings no other setting
  beats on both accuracy and LiteRT time (at least as good on both, better on one).

Exports run after all training, ``--jobs`` at a time as the training (``auto``: one at a
time): nothing the table shows depends on the load they share (sizes and arenas are counted,
Cortex-M instructions are counted under QEMU ``-icount``, and the LiteRT times are taken
afterwards in one pass, :func:`time_exports`).
``--quick``: seed 0, the same grid and schedule.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from fedprune.data.sources import sha256_of
from fedprune.errors import ConfigError, DataError
from fedprune.interpreter import PYTHON
from fedprune.reproduce.study import Claim, Labels, Point, Study, figure, row_of
from fedprune.reproduce.table2 import ROWS, row_arguments
from fedprune.runs.files import write_json
from fedprune.runs.finished import open_finished
from fedprune.runs.names import personal_file

DATASETS = ("uci_har", "wisdm")
(CAAFP,) = [r for r in ROWS if r.name == "caafp_0_0_50"]  # Table 2's CA-AFP (0,0,50) row
FORMAT = "int8"
CORTEX_M = "cortex-m4"
KERNELS = ("cmsis-nn", "reference")  # what edge-export builds for a Cortex-M target
TFLM_ENV, CMSIS_ENV = "FEDPRUNE_TFLM_DIR", "FEDPRUNE_CMSIS_DIR"
# beside a checkout (the layout of fedprune's development machines and CI): shared/tflm/
SHARED_TFLM = Path(__file__).resolve().parents[2].parent / "shared" / "tflm"
REPORT = "export_report.json"
CROSS = "arm-none-eabi-"  # the cross toolchain's prefix (edge_export.micro.cortex_m.CROSS)


@dataclasses.dataclass(frozen=True)
class Setting:
    """One model and mask policy of the study."""

    model: str  # --model
    structure: str  # --structure
    sparsity: float  # the target (and start) fraction: of weights, or of units

    @property
    def labels(self) -> Labels:
        return (
            ("model", self.model),
            ("structure", self.structure),
            ("sparsity", f"{self.sparsity:.2f}"),
        )

    @property
    def name(self) -> str:
        return f"{self.model}, {self.structure} {100 * self.sparsity:.0f} %"

    def arguments(self) -> tuple[str, ...]:
        """The ``fedprune train caafp`` arguments beyond Table 2's: none for the paper's
        setting, so that its run is Table 2's command."""
        args: tuple[str, ...] = ()
        if self.model != "har_cnn":
            args += ("--model", self.model)
        if self.structure != "weights":
            level = f"{self.sparsity:g}"
            args += ("--structure", self.structure)
            args += ("--start-sparsity", level, "--target-sparsity", level)
        return args


PAPER = Setting("har_cnn", "weights", 0.7)
STRUCTURED = tuple(Setting("har_cnn", "filters", s) for s in (0.5, 0.7, 0.85))
SMALL = Setting("har_cnn_small", "weights", 0.7)
SETTINGS = (PAPER, *STRUCTURED, SMALL)


def grid(datasets: Sequence[str], schedule: Sequence[str]) -> list[Point]:
    """Every setting on every dataset, trained with ``schedule`` (the Table 2 arguments but
    the dataset; a shorter one makes a smaller study of the same shape)."""
    return [
        Point((("dataset", d), *s.labels), "caafp", ("--dataset", d, *schedule, *s.arguments()))
        for d in datasets
        for s in SETTINGS
    ]


def points(quick: bool) -> list[Point]:
    """The grid of the module docstring (the same with ``quick``: only the seeds differ)."""
    schedule = row_arguments(CAAFP, "uci_har")[2:]  # without "--dataset uci_har"
    return grid(DATASETS, schedule)


# --- the exports ---------------------------------------------------------------------------


def cortex_m_trees() -> tuple[Path, Path] | str:
    """The TFLite Micro tree and CMSIS folder the Cortex-M builds use, or why there are
    none: ``$FEDPRUNE_TFLM_DIR`` and ``$FEDPRUNE_CMSIS_DIR`` where set, else
    ``shared/tflm/tree`` and ``shared/tflm/cmsis`` beside the checkout; with the programs
    the builds need (:func:`edge_export.micro.cortex_m.missing_tools`)."""
    from edge_export.micro.cortex_m import missing_tools

    tflm = Path(os.environ.get(TFLM_ENV) or SHARED_TFLM / "tree")
    cmsis = Path(os.environ.get(CMSIS_ENV) or SHARED_TFLM / "cmsis")
    if not (tflm / "tensorflow/lite/micro/micro_interpreter.h").is_file():
        return f"no TFLite Micro tree at {tflm} (set {TFLM_ENV})"
    if not (cmsis / "cmsis_nn/Include/arm_nnfunctions.h").is_file():
        return f"no CMSIS-NN at {cmsis} (set {CMSIS_ENV})"
    missing = missing_tools()
    if missing:
        return f"{', '.join(missing)} not installed"
    if not _cross_compiles_cxx():
        return (
            "arm-none-eabi-g++ has no C++ standard library (TFLite Micro needs it; Debian: "
            "libstdc++-arm-none-eabi-newlib)"
        )
    return tflm, cmsis


def _cross_compiles_cxx() -> bool:
    """Whether the cross compiler finds the C++ headers TFLite Micro includes: Debian's
    gcc-arm-none-eabi has none without libstdc++-arm-none-eabi-newlib."""
    probe = subprocess.run(
        [f"{CROSS}g++", "-x", "c++", "-mcpu=cortex-m4", "-mthumb", "-fsyntax-only", "-"],
        input=b"#include <cstddef>\n#include <cstdarg>\n",
        capture_output=True,
    )
    return probe.returncode == 0


class ExportFailed(ConfigError):
    """An edge-export command of the study failed; ``log`` holds its output."""

    def __init__(self, message: str, log: Path):
        super().__init__(message)
        self.log = log


def export_dir(run: Path, suffix: str = "") -> Path:
    """``<out>/exports/<run's name><suffix>`` for the run ``<out>/runs/<name>``."""
    return run.parent.parent / "exports" / f"{run.name}{suffix}"


def export_command(
    run: Path, out: Path, ft_epochs: int, data_dir: str | None, clients: str = "all", **micro: str
) -> tuple[str, ...]:
    """``python -m edge_export.cli RUN --formats int8 --micro ...``: ``micro`` adds
    ``--target``, ``--tflm-dir`` and ``--cmsis-dir`` (as ``target=``, ``tflm_dir=``, ...)."""
    options = [f"--{k.replace('_', '-')}={v}" for k, v in micro.items()]
    return (
        *PYTHON, "-m", "edge_export.cli", str(run), "--clients", clients,
        "--formats", FORMAT, "--micro", *options, "--ft-epochs", str(ft_epochs),
        "--out", str(out), "--no-progress", *(("--data-dir", data_dir) if data_dir else ()),
    )  # fmt: skip


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def other_weights(out: Path, weights: Path) -> str | None:
    """Why the export in ``out`` is not of the run's ``weights`` file (the run was trained
    again since), else ``None``. Each exported file's record names the sha256 of the weights
    it was made from; a record from before fedprune wrote it is of other weights where the
    weights file is newer than the record. An archived run keeps no weights: its export is
    taken as it is (nothing else could be exported)."""
    if not weights.is_file():
        return None
    entries = json.loads((out / REPORT).read_text())
    records = [(out / e["path"]).with_suffix(".json") for e in entries if "path" in e]
    digest = sha256_of(weights)
    for record in records:
        meta = json.loads(record.read_text()) if record.is_file() else {}
        if "models_sha256" not in meta:
            if record.is_file() and weights.stat().st_mtime > record.stat().st_mtime:
                return f"{weights.name} is newer than the export (the run was trained again)"
            continue
        if meta["models_sha256"] != digest:
            return f"it was made from another {weights.name} (the run was trained again)"
    return None


def _export(command: Sequence[str], out: Path, what: str, weights: Path) -> list[dict]:
    """The entries of ``out``'s export report, exporting first where there is none or where
    it is of other weights than ``weights`` (:func:`other_weights`; ``out``, the study's own
    folder, is then emptied: edge-export refuses a folder holding files without their
    report); the command's output goes to ``<out>.log``."""
    report = out / REPORT
    stale = other_weights(out, weights) if report.is_file() else None
    if stale is not None:
        _say(f"{what}: exporting again: {stale}")
        shutil.rmtree(out)
    if report.is_file():
        _say(f"{what}: exported")
    else:
        if out.exists():  # what an export killed while moving its files in left behind
            shutil.rmtree(out)
        log = out.with_name(f"{out.name}.log")
        log.parent.mkdir(parents=True, exist_ok=True)
        _say(f"{what}: exporting (log: {log})")
        with open(log, "ab") as handle:
            code = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT).returncode
        if code in (130, -signal.SIGINT):
            raise KeyboardInterrupt
        if code != 0 or not report.is_file():
            raise ExportFailed(f"{what}: the export failed (exit {code}); see {log}", log)
    entries = json.loads(report.read_text())
    if not isinstance(entries, list) or not all(e.get("format") == FORMAT for e in entries):
        raise DataError(f"{report}: not an {FORMAT} export of this study; delete {out} to redo it")
    return entries


def _shapes(out: Path, entry: dict) -> str:
    """The client's model's kernel shapes after compaction, as text (``dense``: the run's
    model as trained, the same for every client)."""
    meta = json.loads((out / entry["path"]).with_suffix(".json").read_text())
    record = meta.get("compaction")
    return "dense" if record is None else json.dumps(record["kernel_shapes"]["compacted"])


def after_run(run: Path, data_dir: str | None) -> dict:
    """Export the finished run ``run`` (module docstring) unless exported, and what its
    exports measured: per-run medians over the clients, and text naming how."""
    summary = open_finished(run).summary
    ft = max(int(e) for e in summary["finetune"])
    out = export_dir(run)
    weights = run / personal_file(ft)
    entries = _export(export_command(run, out, ft, data_dir), out, f"export {run.name}", weights)
    litert = [e["litert"] for e in entries if e.get("litert", {}).get("loads") is not None]
    times = [r["latency_ms"] for r in litert if "latency_ms" in r]
    found: dict = {
        "export_ft": ft,
        "int8_acc": float(np.mean([e["tflite_acc"] for e in entries])),
        "int8_kb": float(np.median([e["bytes"] for e in entries])) / 1024,
        "arena_kb": _median([e.get("micro_arena_bytes") for e in entries], 1 / 1024),
        "litert_us": float(np.median(times)) * 1000 if times else None,
        "litert_loads": (
            f"{sum(r['loads'] for r in litert)}/{len(entries)}" if litert else "not installed"
        ),
        "litert": f"{litert[0]['runtime']} on {litert[0]['cpu']}" if times else "",
    }
    found.update(_cortex_m(run, out, entries, ft, data_dir, weights))
    return found


TIMES = "litert_times.json"  # under <out>/exports/: the files timed together, per file


def time_exports(found: dict[Path, dict]) -> dict[Path, dict]:
    """Every exported int8 file of the runs in ``found`` timed again in LiteRT in one
    interleaved pass (:func:`edge_export.verify.time_together`), and each run's
    ``litert_us`` (the median over its files) taken from it; the times are written to
    ``<out>/exports/litert_times.json``. Interpretation: each export times its own files
    when it is made, minutes or days apart from the others, and at a few µs per window
    that drifts by up to 22 % between exports of the same shapes; timed together, the settings'
    ratios are measured under the same conditions. Where no file is kept (an archive of the
    study re-rendered: reports and records only), the times ``litert_times.json`` recorded
    are taken; a run with neither keeps its export's own time.

    The record is a list of passes. A new pass replaces the times of the files it timed
    and keeps the earlier passes' times of the files it could not (an archived dataset's
    runs beside newly trained ones), so one dataset's settings are always compared within
    one pass, and a run's ``litert`` line names the pass its times come from."""
    from edge_export.verify import time_together

    exported: dict[Path, list[Path]] = {}
    for run in found:
        out = export_dir(run)
        entries = json.loads((out / REPORT).read_text()) if (out / REPORT).is_file() else []
        exported[run] = [out / e["path"] for e in entries if "path" in e]
    if not any(exported.values()):
        return found
    record_path = export_dir(next(iter(found))).parent / TIMES
    passes = _timing_passes(record_path) if record_path.is_file() else []
    files = {r: ps for r, ps in exported.items() if ps and all(p.is_file() for p in ps)}
    every = [p for paths in files.values() for p in paths]
    if every:
        timed = time_together([p.read_bytes() for p in every])
        if timed is not None:
            latency = {_key(p): t for p, t in zip(every, timed.latency_ms)}
            kept = [{**old, "latency_ms": {k: t for k, t in old["latency_ms"].items()
                                           if k not in latency}} for old in passes]  # fmt: skip
            new = {"runtime": timed.runtime, "cpu": timed.cpu, "rounds": timed.rounds,
                   "invokes": timed.invokes, "latency_ms": latency}  # fmt: skip
            passes = [old for old in kept if old["latency_ms"]] + [new]
            write_json(record_path, {"passes": passes})
    if not passes:
        return found
    revised = {}
    for run, result in found.items():
        keys = [_key(p) for p in exported[run]]
        held = [one for one in passes if keys and all(k in one["latency_ms"] for k in keys)]
        times = [held[-1]["latency_ms"][k] for k in keys] if held else []
        times = [t for t in times if t]  # a file LiteRT's default interpreter refuses has no time
        if times:
            one = held[-1]
            runs = len({k.split("/", 1)[0] for k in one["latency_ms"]})
            how = (
                f"{one['runtime']} on {one['cpu']}, every file of {runs} run{'s' * (runs != 1)} "
                f"timed together ({one['rounds']} interleaved rounds of {one['invokes']} "
                "invokes per file)"
            )
            result = {**result, "litert_us": float(np.median(times)) * 1000, "litert": how}
        revised[run] = result
    return revised


def _timing_passes(path: Path) -> list[dict]:
    """The passes ``litert_times.json`` holds; a record of one pass (as the study first
    wrote it) is read as a list of one. A damaged record is one error line."""
    try:
        record = json.loads(path.read_text())
    except ValueError:
        record = None
    passes = record.get("passes", [record]) if isinstance(record, dict) else None
    keys = {"runtime", "cpu", "rounds", "invokes", "latency_ms"}
    if not isinstance(passes, list) or not all(
        isinstance(one, dict) and keys <= one.keys() and isinstance(one["latency_ms"], dict)
        for one in passes
    ):
        raise DataError(
            f"{path}: not a LiteRT timing record (damaged?); delete it to keep each export's "
            "own times"
        )
    return passes


def _key(path: Path) -> str:
    """An exported file's key in ``litert_times.json``: ``<run>/client<ID>/<format>.tflite``."""
    return path.relative_to(path.parents[2]).as_posix()


def _median(values: Sequence[float | None], scale: float = 1.0) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.median(known)) * scale if len(known) == len(values) and known else None


def _cortex_m(
    run: Path, out: Path, entries: list[dict], ft: int, data_dir: str | None, weights: Path
) -> dict:
    """The Cortex-M4 builds' numbers (one client per distinct compacted model, the counts
    given to every client of its shape), or ``cortex_m`` saying why there are none."""
    trees = cortex_m_trees()
    if isinstance(trees, str):
        return {"cortex_m": f"not measured: {trees}"}
    shapes = {e["client"]: _shapes(out, e) for e in entries}
    built = {}
    for client, shape in shapes.items():
        built.setdefault(shape, client)
    tflm, cmsis = trees
    m4_out = export_dir(run, f"-{CORTEX_M}")
    clients = ",".join(str(c) for c in sorted(built.values()))
    trees = {"tflm_dir": str(tflm), "cmsis_dir": str(cmsis)}
    command = export_command(run, m4_out, ft, data_dir, clients, target=CORTEX_M, **trees)
    try:
        built_entries = _export(command, m4_out, f"export {run.name} for a {CORTEX_M}", weights)
    except ExportFailed as failed:  # said in the table; the other columns stand
        _say(str(failed))
        return {"cortex_m": f"not measured: the build failed, see {failed.log}"}
    measured = {e["client"]: e["cortex_m"][CORTEX_M] for e in built_entries}
    per_client = [measured[built[shapes[c]]] for c in shapes]
    found = {
        f"m4_{kernels.replace('-', '_')}_minstr": _median(
            [b["instructions"].get(kernels) for b in per_client], 1e-6
        )
        for kernels in KERNELS
    }
    found["m4_flash_kb"] = _median([b["flash_bytes"] for b in per_client], 1 / 1024)
    found["m4_ram_kb"] = _median([b["ram_bytes"] for b in per_client], 1 / 1024)
    found["cortex_m"] = f"measured ({len(built)} of {len(shapes)} clients built)"
    return found


# --- the table -----------------------------------------------------------------------------

DEVICE = (
    "int8_kb",
    "arena_kb",
    "litert_us",
    "m4_cmsis_nn_minstr",
    "m4_reference_minstr",
    "m4_flash_kb",
    "m4_ram_kb",
)
TEXTS = ("litert", "litert_loads", "cortex_m")


def measure(summary: dict) -> list[tuple[Labels, dict]]:
    """One row per fine-tuning length: accuracy and fairness, the run's device numbers
    (:func:`after_run`; ``None`` where it did not run), the int8 accuracy at the exported
    length."""
    device = summary.get("after_run", {})
    rows = []
    for ft, result in sorted(summary["finetune"].items(), key=lambda item: int(item[0])):
        values: dict = {"acc": result["avg_acc"], "fairness": result["fairness"]}
        values["int8_acc"] = device.get("int8_acc") if int(ft) == device.get("export_ft") else None
        values.update({k: device.get(k) for k in DEVICE})
        values.update({k: device[k] for k in TEXTS if device.get(k)})
        rows.append(((("ft", ft),), values))
    return rows


def _setting(row: dict) -> Setting:
    return Setting(row["model"], row["structure"], float(row["sparsity"]))


def pareto(rows: Sequence[dict]) -> list[dict]:
    """The rows no other row beats on both accuracy and LiteRT time (at least as good on
    both, better on one); rows without a time are left out."""
    timed = [r for r in rows if r.get("litert_us") is not None and r.get("acc") is not None]

    def beats(a: dict, b: dict) -> bool:
        no_worse = a["acc"] >= b["acc"] and a["litert_us"] <= b["litert_us"]
        return no_worse and (a["acc"] > b["acc"] or a["litert_us"] < b["litert_us"])

    return [r for r in timed if not any(beats(o, r) for o in timed if o is not r)]


def _cell(row: dict | None, name: str, digits: int = 1, percent: bool = False) -> str:
    value = None if row is None else row.get(name)
    if value is None:
        return "–"
    scale = 100 if percent else 1
    text = f"{scale * value:.{digits}f}"
    std = row.get(f"{name}_std")
    return text + (f" ± {scale * std:.{digits}f}" if std is not None else "")


def claims(table: list[dict]) -> list[Claim]:
    """The goal, per dataset, at 25 fine-tuning epochs: a structured setting within 1 pp of
    the paper's setting whose int8 file, TFLite Micro arena and LiteRT time are each at most
    half the paper setting's (its int8 file stores every weight: the dense model's cost)."""
    found = []
    for dataset in DATASETS:
        base = row_of(table, dataset=dataset, ft="25", **dict(PAPER.labels))
        if base is None:
            continue
        evidence, held = [], []
        for setting in STRUCTURED:
            row = row_of(table, dataset=dataset, ft="25", **dict(setting.labels))
            if row is None:
                continue
            costs = [row.get(k) for k in ("int8_kb", "arena_kb", "litert_us")]
            bases = [base.get(k) for k in ("int8_kb", "arena_kb", "litert_us")]
            if None in costs or None in bases:
                evidence.append(f"{setting.name}: not exported")
                continue
            gap = row["acc"] - base["acc"]
            ratios = [c / b for c, b in zip(costs, bases)]
            held.append(gap >= -0.01 and all(r <= 0.5 for r in ratios))
            evidence.append(
                f"{setting.name}: {100 * gap:+.2f} pp, int8 file {ratios[0]:.2f}x, arena "
                f"{ratios[1]:.2f}x, LiteRT {ratios[2]:.2f}x"
            )
        found.append(
            Claim(
                f"{dataset} FT 25: a structured setting within 1 pp of the paper's setting "
                "with int8 file, TFLite Micro arena and LiteRT time each at most half its own",
                any(held) if held else None,
                "; ".join(evidence) or "no structured setting trained",
            )
        )
    return found


def _not_measured(table: list[dict]) -> str:
    reasons = {r["cortex_m"] for r in table if str(r.get("cortex_m", "")).startswith("not")}
    return "; ".join(sorted(reasons))


def body(table: list[dict]) -> list[str]:
    """One table per dataset, then how the device columns were measured."""
    header = (
        "| setting | FT | acc % | fairness % | int8 acc % | int8 KB | TFLite Micro arena KB "
        f"| LiteRT µs per window | {CORTEX_M} M instructions (CMSIS-NN) | {CORTEX_M} M "
        f"instructions (reference) | {CORTEX_M} flash KB | {CORTEX_M} RAM KB | Pareto front |"
    )
    missing = _not_measured(table)
    lines: list[str] = []
    for dataset in DATASETS:
        rows = [r for r in table if r.get("dataset") == dataset]
        if not rows:
            continue
        front = {id(r) for ft in {r["ft"] for r in rows} for r in pareto(_at(rows, ft))}
        lines += [f"## {dataset}", "", header, "|" + "---|" * 13]
        for r in sorted(rows, key=lambda r: (int(r["ft"]), SETTINGS.index(_setting(r)))):
            m4 = [_cell(r, k, 2) for k in ("m4_cmsis_nn_minstr", "m4_reference_minstr")]
            m4 += [_cell(r, k) for k in ("m4_flash_kb", "m4_ram_kb")]
            if r.get("m4_cmsis_nn_minstr") is None and missing:
                m4 = ["not measured¹"] * 4
            cells = [
                _setting(r).name, r["ft"], _cell(r, "acc", 2, True),
                _cell(r, "fairness", 2, True), _cell(r, "int8_acc", 2, True),
                _cell(r, "int8_kb"), _cell(r, "arena_kb"), _cell(r, "litert_us"), *m4,
                "yes" if id(r) in front else "",
            ]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    runtimes = sorted({t for r in table for t in str(r.get("litert", "")).split("; ") if t})
    loads = sorted({r["litert_loads"] for r in table if r.get("litert_loads")})
    lines += [
        "Accuracy and fairness: the personal models after FT fine-tuning epochs, mean ± std "
        "over the seeds (Table 2's measure). Device columns: per run the median over the "
        "clients' int8 files of the 25-epoch models (fine-tuning keeps the masks: the 3-epoch "
        "models have the same shapes), then mean ± std over the seeds; int8 acc: the int8 "
        "files' accuracy on the clients' test windows (mean over the clients). Arena: the "
        "TFLite Micro minimum, measured, without the projects' headroom. LiteRT: the default "
        "interpreter (XNNPACK), 1 thread, each file's median time per window"
        + (f", {'; '.join(runtimes)}" if runtimes else "")
        + (f"; files its default interpreter loads per run: {', '.join(loads)}" if loads else "")
        + f". {CORTEX_M}: QEMU, instructions per inference (not cycles: a lower bound on "
        "time at one cycle each), flash and RAM of the deployment build (RAM includes the "
        "arena and an 8 KiB stack); one client built per distinct compacted model. Pareto "
        "front: no other setting of the same dataset and FT is at least as accurate and as "
        "fast, and better in one.",
    ]
    if missing:
        lines += ["", f"¹ {CORTEX_M}: {missing}."]
    return lines


def _at(rows: Sequence[dict], ft: str) -> list[dict]:
    return [r for r in rows if r["ft"] == ft]


def plot(table: list[dict], path: Path) -> None:
    """Accuracy against LiteRT time, one panel per dataset, both fine-tuning lengths, with
    each length's Pareto front; only the datasets the table holds (a study of one dataset
    draws one panel)."""
    datasets = [d for d in DATASETS if any(r.get("dataset") == d for r in table)] or DATASETS
    with figure(path, len(datasets), figsize=(6 * len(datasets), 4.8)) as (_, axes):
        for ax, dataset in zip(np.atleast_1d(axes), datasets):
            rows = [r for r in table if r.get("dataset") == dataset]
            for ft, marker in (("3", "o"), ("25", "s")):
                timed = [r for r in _at(rows, ft) if r.get("litert_us") is not None]
                for r in timed:
                    ax.errorbar(
                        r["litert_us"], 100 * r["acc"], yerr=100 * (r.get("acc_std") or 0.0),
                        xerr=r.get("litert_us_std") or 0.0, marker=marker, capsize=2,
                        color=f"C{SETTINGS.index(_setting(r))}", linestyle="none",
                        mfc="white" if ft == "3" else None,
                    )  # fmt: skip
                front = sorted(pareto(timed), key=lambda r: r["litert_us"])
                if front:
                    ax.step(
                        [r["litert_us"] for r in front], [100 * r["acc"] for r in front],
                        where="post", color="black", alpha=0.5,
                        linestyle=":" if ft == "3" else "-", label=f"Pareto front, FT {ft}",
                    )  # fmt: skip
            for i, s in enumerate(SETTINGS):
                ax.plot([], [], marker="s", color=f"C{i}", linestyle="none", label=s.name)
            ax.plot([], [], marker="o", mfc="white", color="gray", linestyle="none", label="FT 3")
            ax.set_title(dataset)
            ax.set_xlabel("LiteRT µs per window (1 thread, median)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        np.atleast_1d(axes)[0].set_ylabel("accuracy (%), mean ± std over seeds")


STUDY = Study(
    name="device",
    title="Pruning on the device: accuracy against int8 size, arena, LiteRT time, Cortex-M",
    datasets=DATASETS,
    default_seeds=5,
    points=points,
    measure=measure,
    paper_columns={},
    from_paper=False,
    claims=claims,
    plot=plot,
    body=body,
    after_run=after_run,
    after_all=time_exports,
    notes=(
        "Settings: the paper's model with per-weight masks (Table 2's CA-AFP (0,0,50) run), "
        "with structured masks (`--structure filters`) at 50/70/85 % of the units, and "
        "`--model har_cnn_small`; exports under `exports/` beside `runs/`.",
    ),
)
