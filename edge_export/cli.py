"""The ``edge-export`` command: deployable TFLite files of a run's models, verified against Keras.

edge-export runs/fedavg-har --clients 1,2 --formats float32,int8 --out export/
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from fedprune.errors import FedpruneError

DEFAULT_FORMATS = "float32,int8"
DEFAULT_AUTOENCODER_FORMATS = "float32,int8"


def build_parser() -> argparse.ArgumentParser:
    from edge_export.convert import FORMATS

    parser = argparse.ArgumentParser(
        prog="edge-export",
        description="Convert a finished run's per-client models to TFLite, run every file "
        "with the TFLite interpreter on the client's test windows, and write "
        "export_report.json/.md next to the files.",
    )
    parser.add_argument(
        "run_dir",
        help="a finished fedprune run directory (with summary.json); for a FedCRef run the "
        "community autoencoders are exported (formats float32, float16, dynamic, int8)",
    )
    parser.add_argument("--clients", default="all", help="'all' or comma-separated client ids")
    parser.add_argument(
        "--formats",
        default=None,
        help=f"comma-separated, from: {', '.join(FORMATS)} (default: {DEFAULT_FORMATS}; "
        f"FedCRef autoencoders: {DEFAULT_AUTOENCODER_FORMATS}). int8 is post-training "
        "quantization of the trained model; int8-qat converts a copy fine-tuned "
        "quantization-aware first (--qat-epochs), a slightly different model (README: Edge export)",
    )
    parser.add_argument("--out", required=True, help="output folder")
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
        help="also write each client's int8, int8-qat and int16x8 models as TFLite Micro C "
        "arrays (.h/.cc) with their op list and tensor arena size (int8 is added if none of "
        "them is listed)",
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
        help="int8, int8-sparse, int16x8: 'per-channel' maps each sensor channel's training "
        "range onto [-1, 1] before quantizing (the device applies the offset/scale in the "
        ".json and the micro header; folded exactly into the first layer), 'per-tensor' "
        "quantizes the raw input with one scale (default: per-channel)",
    )
    parser.add_argument(
        "--logit-range",
        choices=("decision", "full"),
        default="decision",
        help="int8, int8-sparse: quantization range of the logits before the softmax; "
        "'decision' spans the training windows' lowest runner-up logit to their highest top "
        "logit (finer steps where classes are decided), 'full' their min/max (default: decision)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
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
    args = build_parser().parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        from edge_export.autoencoders import export_fedcref_run, is_fedcref_run
        from edge_export.convert import FORMATS
        from edge_export.export import MICRO_FORMATS, export_run, report_markdown
        from edge_export.run_models import load_run, select_clients
        from fedprune.errors import ConfigError

        fedcref = is_fedcref_run(args.run_dir)
        spec = args.formats or (DEFAULT_AUTOENCODER_FORMATS if fedcref else DEFAULT_FORMATS)
        formats = [f.strip() for f in spec.split(",") if f.strip()]
        if fedcref:
            export_fedcref_run(
                args.run_dir, formats, args.out, args.data_dir, args.micro, not args.no_progress
            )
            print((Path(args.out) / "export_report.md").read_text(), end="")
            return 0
        unknown = [f for f in formats if f not in FORMATS]
        if unknown or not formats:
            raise ConfigError(f"unknown format(s) {unknown}; choose from {', '.join(FORMATS)}")
        run = load_run(args.run_dir, args.data_dir, args.ft_epochs)
        clients = select_clients(run, args.clients)
        if args.micro and not set(MICRO_FORMATS) & set(formats):
            formats.append("int8")
        entries = export_run(
            run,
            clients,
            formats,
            args.out,
            progress=not args.no_progress,
            micro=args.micro,
            qat_epochs=args.qat_epochs,
            qat_learning_rate=args.qat_lr,
            input_scaling=args.input_scaling,
            logit_range=args.logit_range,
        )
        print(report_markdown(entries), end="")
    except FedpruneError as err:
        print(f"edge-export: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
