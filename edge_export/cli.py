"""The ``edge-export`` command: deployable TFLite files of a run's models, verified against Keras.

edge-export runs/fedavg-har --clients 1,2 --formats float32,int8 --out export/fedavg-har

This module imports no TensorFlow: ``--help`` answers at once, and every input that can be
checked without it (the run's files, the formats, the client list, the data, a writable
``--out``) is checked before the heavy imports, so a bad input is one line within seconds and
nothing is written. Any problem is one line ``edge-export: error: <what>; <fix>`` (exit 2),
Ctrl-C one line ``edge-export: interrupted`` (exit 130). TensorFlow's log lines are left out
unless ``--verbose`` (:mod:`fedprune.quiet`).
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from edge_export.formats import (
    AUTOENCODER_FORMATS,
    DEFAULT_AUTOENCODER_FORMATS,
    DEFAULT_FORMATS,
    FORMATS,
)
from edge_export.micro.targets import TARGETS as MICRO_TARGETS
from fedprune.errors import ConfigError, DataError, FedpruneError
from fedprune.quiet import quiet_environment
from fedprune.runs.files import staged_folder
from fedprune.runs.lock import LOCK_FILE, FolderLock

if TYPE_CHECKING:
    from fedprune.runs.finished import FinishedRun

PROG = "edge-export"


def build_parser() -> argparse.ArgumentParser:
    """The command's arguments (imports nothing heavy)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Convert a finished run's per-client models to TFLite, run every file "
        "with the TFLite interpreter on the client's test windows, and write "
        "export_report.json/.md next to the files.",
    )
    parser.add_argument(
        "run_dir",
        help="a finished fedprune run directory (with summary.json); for a FedCRef run the "
        "community autoencoders are exported (formats "
        f"{', '.join(AUTOENCODER_FORMATS)}), for a Fed-HIRE, k-FED or federated k-means run "
        "each client's assigner (sample -> cluster; float32)",
    )
    parser.add_argument("--clients", default="all", help="'all' or comma-separated client ids")
    parser.add_argument(
        "--formats",
        default=None,
        help=f"comma-separated, from: {', '.join(FORMATS)} (default: {DEFAULT_FORMATS}; "
        f"FedCRef autoencoders: {DEFAULT_AUTOENCODER_FORMATS}). int8 is post-training "
        "quantization of the trained model; int8-float-head is int8 with its last Dense layer "
        "and softmax in float32 (float input and output, no int8 output rounding: the closest "
        "8-bit agreement with Keras); int8-qat converts a copy fine-tuned "
        "quantization-aware first (--qat-epochs), a slightly different model (README: Edge export)",
    )
    parser.add_argument(
        "--out",
        required=True,
        help="output folder: new or empty, or holding an earlier export with --overwrite",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the earlier export in --out (recognised by its export_report.json); the "
        "new files take its place only once all are written and verified",
    )
    parser.add_argument(
        "--ft-epochs",
        type=int,
        default=None,
        help="CA-AFP runs: export the personal models after this many fine-tuning epochs "
        "(default: the longest the run has)",
    )
    parser.add_argument("--data-dir", default=None, help="as for fedprune (for the client data)")
    parser.add_argument(
        "--micro",
        action="store_true",
        help="also write each client's int8, int8-float-head, int8-qat and int16x8 models as "
        "TFLite Micro projects (client<ID>/micro_<format>/: the model as C++ with its measured "
        "tensor arena plus headroom and a function registering its ops, test vectors from the "
        "client's test windows, and a main.cc/Makefile that builds and checks them on the "
        "host: make TFLM_DIR=<tflm tree>); int8 is added if none of them is listed",
    )
    parser.add_argument(
        "--target",
        choices=MICRO_TARGETS,
        default=None,
        help="--micro: what the projects' Makefiles build for by default (make TARGET=... "
        "chooses another): host, or a Cortex-M core with Arm's CMSIS-NN kernels (default: host)",
    )
    parser.add_argument(
        "--tflm-dir",
        default=None,
        help="--micro: a TFLite Micro source tree; each project is then built and run: on the "
        "host, or for a Cortex-M --target under QEMU with CMSIS-NN and reference kernels (flash, "
        "RAM and instructions per inference in the report; needs --cmsis-dir)",
    )
    parser.add_argument(
        "--cmsis-dir",
        default=None,
        help="--tflm-dir with a Cortex-M --target: the folder with kernels/, cmsis_nn/, cmsis/ "
        "(TFLM's CMSIS-NN kernels, CMSIS-NN, the CMSIS core headers)",
    )
    parser.add_argument(
        "--qat-epochs",
        type=_positive_int,
        default=2,
        help="int8-qat formats: epochs of quantization-aware fine-tuning (tfmot) of a copy of "
        "each client's model on its training windows before conversion; pruned weights stay "
        "zero (default: 2)",
    )
    parser.add_argument(
        "--qat-lr",
        type=_positive_float,
        default=1e-4,
        help="int8-qat formats: Adam learning rate of that fine-tuning (default: 1e-4)",
    )
    parser.add_argument(
        "--input-scaling",
        choices=("per-channel", "per-tensor"),
        default="per-channel",
        help="int8, int8-sparse, int8-float-head, int16x8: 'per-channel' maps each sensor "
        "channel's training range onto [-1, 1] before quantizing (the device applies the "
        "offset/scale in the .json and the micro header; folded exactly into the first "
        "layer), 'per-tensor' quantizes the raw input with one scale (default: per-channel)",
    )
    parser.add_argument(
        "--logit-range",
        choices=("decision", "full"),
        default="decision",
        help="int8, int8-sparse: quantization range of the logits before the softmax; "
        "'decision' spans the training windows' lowest runner-up logit to their highest top "
        "logit (finer steps where classes are decided), 'full' their min/max (default: decision)",
    )
    parser.add_argument(
        "--calibration",
        choices=("auto", "plain", "equalized", "half-equalized"),
        default="auto",
        help="int8, int8-sparse, int8-float-head: how each client's model is prepared; 'auto' "
        "converts the candidates on four fifths of the client's training windows and keeps "
        "the one that agrees best with Keras on the other fifth (recorded in the .json); "
        "'equalized' / 'half-equalized' rescale the last hidden Dense layer's units (exact "
        "in float), 'plain' leaves them (default: auto)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show TensorFlow's and TFLite's log lines and warnings (left out by default)",
    )
    return parser


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status (0, 2 for a bad input, 130 for Ctrl-C)."""
    args = build_parser().parse_args(argv)
    quiet_environment(args.verbose)  # before TensorFlow is imported
    try:
        return _export(args)
    except FedpruneError as err:
        return _error(str(err))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except OSError as err:
        message = _os_error(err, args.out)
        if message is None:
            raise
        return _error(message)


def _error(message: str) -> int:
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)
    return 2


def _micro_target(args: argparse.Namespace) -> object:
    """``--target``, ``--tflm-dir``, ``--cmsis-dir`` as a checked
    :class:`edge_export.micro.cortex_m.MicroTarget` (``None`` without them)."""
    from edge_export.micro.cortex_m import MicroTarget

    if args.target is None and args.tflm_dir is None and args.cmsis_dir is None:
        return None
    if not args.micro:
        raise ConfigError("--target, --tflm-dir and --cmsis-dir are options of --micro")
    tflm, cmsis = (Path(v) if v else None for v in (args.tflm_dir, args.cmsis_dir))
    target = MicroTarget(args.target or "host", tflm, cmsis)
    target.check()
    return target


def _export(args: argparse.Namespace) -> int:
    """Check every input, then import TensorFlow, export, verify and print the report."""
    from edge_export.assigner import is_assigner_run
    from edge_export.formats import parse_formats
    from edge_export.run_models import read_deployed
    from fedprune.runs.finished import open_finished

    micro_target = _micro_target(args)
    finished = open_finished(args.run_dir)
    if is_assigner_run(finished):  # an older clustering run: one line, train it again
        return _export_assigners(args, finished)
    community = finished.deploy.kind == "community"
    models = finished.community_models() if community else None
    deployed = None if community else read_deployed(finished, args.ft_epochs)
    formats = parse_formats(args.formats, autoencoders=community)
    out = check_out(args.out)
    with FolderLock(out, "--out"):  # one process writes a folder at a time
        replaced = earlier_export(out, args.overwrite)
        with staged_folder(out, replaced, REPORTS) as stage:  # all files, or none
            report = _export_into(args, finished, stage, models, deployed, formats, micro_target)
    print(report, end="")
    return 0


def _export_into(
    args: argparse.Namespace,
    finished: FinishedRun,
    out: Path,
    models: object,
    deployed: object,
    formats: list[str],
    micro_target: object = None,
) -> str:
    """Export ``finished``'s models (``models``: a community run's autoencoders, else
    ``None``; ``deployed``: the personal models' manifest) into ``out``, which this process
    holds; returns the report (Markdown) to print."""
    from edge_export.formats import MICRO_FORMATS
    from edge_export.run_models import load_run, parse_clients, select_clients

    community = models is not None
    progress = not args.no_progress
    if community:
        _heavy_imports()
        from edge_export.autoencoders import export_fedcref_run, report_markdown

        entries = export_fedcref_run(
            finished.path, formats, out, args.data_dir, args.micro, progress, models
        )
        return report_markdown(entries)
    parse_clients(args.clients)  # a malformed list fails before the data is read
    run = load_run(finished.path, args.data_dir, deployed=deployed)
    clients = select_clients(run, args.clients)
    if args.micro and not set(MICRO_FORMATS) & set(formats):
        formats.append("int8")
    _heavy_imports()
    from edge_export.export import export_run, report_markdown

    entries = export_run(
        run,
        clients,
        formats,
        out,
        progress=progress,
        micro=args.micro,
        qat_epochs=args.qat_epochs,
        qat_learning_rate=args.qat_lr,
        input_scaling=args.input_scaling,
        logit_range=args.logit_range,
        calibration=args.calibration,
        micro_target=micro_target,
    )
    return report_markdown(entries)


def _export_assigners(args: argparse.Namespace, finished: FinishedRun) -> int:
    """A clustering run (deploy kind ``assigner``): one float32 assigner per client
    (:mod:`edge_export.assigner`); options, clients and data are checked before TensorFlow."""
    from edge_export.assigner import check_assigner_options, load_job
    from edge_export.run_models import parse_clients

    check_assigner_options(args.formats, args.micro)
    job = load_job(finished.path, parse_clients(args.clients), args.data_dir)
    out = check_out(args.out)
    with FolderLock(out, "--out"):  # one process writes a folder at a time
        replaced = earlier_export(out, args.overwrite)
        _heavy_imports()
        from edge_export.assigner import export_assigners, report_markdown

        with staged_folder(out, replaced, REPORTS) as stage:  # all files, or none
            entries = export_assigners(job, stage, progress=not args.no_progress)
    print(report_markdown(entries), end="")
    return 0


def _heavy_imports() -> None:
    """Import TensorFlow (after :func:`quiet_environment`) and quiet its Python logging."""
    from fedprune.quiet import native_output, quiet_python_logging

    with native_output():  # TF's import-time lines that no log level reaches
        import tensorflow  # noqa: F401
    quiet_python_logging()


def check_out(out: str | os.PathLike) -> Path:
    """``--out`` as a path, if it is a folder or can be created as one, and is writable.

    Creates nothing: the export creates the folder when it writes its first file.
    """
    path = Path(out)
    hint = "pass a folder path (it is created if missing)"
    if path.exists() and not path.is_dir():
        raise DataError(f"--out {path} is a file, not a folder; {hint}")
    existing = path
    while not (existing.exists() or existing.is_symlink()):
        existing = existing.parent
    if existing.is_symlink() and not existing.exists():  # dangling, or a loop of links
        raise DataError(
            f"--out {path}: {existing} is a symbolic link to {os.readlink(existing)!r}, which "
            "does not exist; make that folder or pass another --out"
        )
    if not existing.is_dir():
        raise DataError(f"--out {path}: {existing} is a file, so the folder cannot be made; {hint}")
    if not os.access(existing, os.W_OK | os.X_OK):
        where = "the folder" if existing == path else f"{existing}, where it would be made,"
        raise DataError(f"--out {path}: {where} is not writable; pass a folder you can write to")
    return path


REPORT = "export_report.json"
REPORTS = ("export_report.md", REPORT)  # moved into --out last: they vouch for the files


def earlier_export(out: Path, overwrite: bool) -> list[str]:
    """The entries of ``out`` that the new export replaces: none for a new or empty folder;
    with ``overwrite``, those of an earlier export (a folder holding ``export_report.json``,
    nothing but what an export wrote). Anything else is one :class:`DataError`: two runs'
    files in one folder, under a report of one, would be mistaken for one export."""
    entries = sorted(
        name
        for name in os.listdir(out)
        if name != LOCK_FILE and not name.startswith((".staged-", ".replaced-"))
    )
    if not entries:
        return []
    shown = ", ".join(entries[:3]) + (f" and {len(entries) - 3} more" if len(entries) > 3 else "")
    if REPORT not in entries:
        raise DataError(
            f"--out {out} already holds files that are not an export ({shown}; no {REPORT}); "
            "pass an empty or new folder"
        )
    if not overwrite:
        raise DataError(
            f"--out {out} already holds an export ({shown}); pass --overwrite to replace it, "
            "or pass an empty or new folder"
        )
    return entries


_WRITE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)


def _os_error(err: OSError, out: str) -> str | None:
    """One line for an operating-system error while exporting; ``None``: not the user's."""
    reason = err.strerror or str(err)
    if err.filename is None:
        if err.errno in _WRITE_ERRORS:
            return f"cannot write into --out {out} ({reason}); free space or pass another --out"
        return None
    name = Path(os.fsdecode(err.filename))
    name = Path(*(part for part in name.parts if not part.startswith(".staged-")))
    if name.absolute().is_relative_to(Path(out).absolute()):
        return f"cannot write {name} ({reason}); pass a writable --out"
    return f"{name}: {reason}; check that path and its permissions"


if __name__ == "__main__":
    sys.exit(main())
