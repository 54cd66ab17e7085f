"""The ``fedprune`` command line.

    fedprune data stats --dataset wisdm
    fedprune train fedavg --dataset uci_har --rounds 5 --clients-per-round 10 --out runs/NAME

Errors a user can fix are printed as one line (``fedprune: error: ...``) with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from fedprune.errors import FedpruneError

DATASETS = ("uci_har", "wisdm")


def _add_data_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dataset", required=True, choices=DATASETS, help="which HAR dataset to use"
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="folder with uci_har/ and wisdm/ sub-folders "
        "(default: $FEDPRUNE_DATA_DIR, else ./data; missing files are downloaded)",
    )


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fedprune",
        description="Clustered, pruned federated learning on TensorFlow Federated.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    data = commands.add_parser("data", help="inspect datasets").add_subparsers(
        dest="data_command", required=True
    )
    stats = data.add_parser(
        "stats",
        help="print the heterogeneity figures of the paper's Table 1",
        description="Quantity, label and feature skew of the natural one-client-per-subject "
        "partition (definitions in fedprune/data/stats.py).",
    )
    _add_data_args(stats)
    stats.add_argument("--json", action="store_true", help="print JSON instead of a table")

    train = commands.add_parser("train", help="train a federated model").add_subparsers(
        dest="method", required=True
    )
    fedavg = train.add_parser(
        "fedavg",
        help="plain FedAvg (CA-AFP Phase 1 only)",
        description="Federated averaging on TFF; writes config.json, metrics.csv, "
        "checkpoint.npz and summary.json to --out. Re-running the same command resumes "
        "an interrupted run, and returns a finished one without recomputing it.",
    )
    _add_data_args(fedavg)
    fedavg.add_argument("--rounds", type=_positive_int, default=50, help="global rounds (50)")
    fedavg.add_argument(
        "--clients-per-round", type=_positive_int, default=10, help="clients sampled per round (10)"
    )
    fedavg.add_argument("--local-epochs", type=_positive_int, default=3, help="local epochs E (3)")
    fedavg.add_argument("--batch-size", type=_positive_int, default=32, help="batch size (32)")
    fedavg.add_argument("--lr", type=float, default=1e-3, help="client Adam learning rate (1e-3)")
    fedavg.add_argument("--seed", type=int, default=0, help="seed for init, split, sampling (0)")
    fedavg.add_argument(
        "--standardize",
        action="store_true",
        help="z-score each channel per client, fitted on the client's training windows",
    )
    fedavg.add_argument("--out", required=True, help="run directory, e.g. runs/fedavg-har")
    fedavg.add_argument(
        "--workers",
        type=_positive_int,
        default=1,
        help="local TFF worker processes; >1 splits each round's clients across them (1)",
    )
    fedavg.add_argument(
        "--remote-worker",
        action="append",
        default=[],
        metavar="HOST:PORT",
        help="a TFF worker_binary started on another host (repeatable)",
    )
    fedavg.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return parser


def _data_stats(args: argparse.Namespace) -> None:
    from fedprune.data.registry import load_windows
    from fedprune.data.stats import heterogeneity

    h = heterogeneity(load_windows(args.dataset, args.data_dir))
    if args.json:
        import dataclasses

        print(json.dumps(dataclasses.asdict(h), indent=2))
        return
    print(f"{args.dataset}: {h.num_clients} clients")
    width = max(len(name) for name, _ in h.rows())
    for name, value in h.rows():
        print(f"  {name:<{width}}  {value}")


def _train(args: argparse.Namespace) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # hides cuDNN/cuFFT registration noise
    from fedprune.algorithms.fedavg import FedAvgConfig, run_fedavg
    from fedprune.engine import execution

    config = FedAvgConfig(
        dataset=args.dataset,
        rounds=args.rounds,
        clients_per_round=args.clients_per_round,
        local_epochs=args.local_epochs,
        batch_size=args.batch_size,
        learning_rate=args.lr,
        seed=args.seed,
        standardize=args.standardize,
    )
    config.validate()
    execution.install(
        num_local_workers=args.workers if not args.remote_worker else 0,
        remote_workers=tuple(args.remote_worker),
        log_dir=os.path.join(args.out, "tff-logs"),
    )
    try:
        summary = run_fedavg(config, args.out, args.data_dir, progress=not args.no_progress)
    finally:
        execution.shutdown()
    shown = {k: v for k, v in summary.items() if k != "client_acc"}
    print(json.dumps(shown, indent=2))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "data":
            _data_stats(args)
        elif args.command == "train":
            _train(args)
    except FedpruneError as err:
        print(f"fedprune: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fedprune: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
