"""The ``fedprune`` command line.

    fedprune data stats --dataset wisdm
    fedprune train fedavg --dataset uci_har --rounds 5 --clients-per-round 10 --out runs/NAME
    fedprune train fedcref --dataset mnist --dirtiness 0.3 --out runs/NAME

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


def _int_list(length: int | None):  # noqa: ANN202 (argparse type factory)
    def parse(text: str) -> tuple[int, ...]:
        try:
            values = tuple(int(v) for v in text.split(","))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated integers, got {text!r}"
            ) from None
        if length is not None and len(values) != length:
            raise argparse.ArgumentTypeError(f"expected {length} values, got {text!r}")
        return values

    return parse


def _name_list(text: str) -> tuple[str, ...]:
    """Comma-separated names; whether they exist is checked by the configuration."""
    return tuple(n.strip() for n in text.split(",") if n.strip())


def _add_training_args(parser: argparse.ArgumentParser) -> None:
    _add_data_args(parser)
    parser.add_argument(
        "--clients-per-round", type=_positive_int, default=10, help="clients sampled per round (10)"
    )
    parser.add_argument("--local-epochs", type=_positive_int, default=3, help="local epochs E (3)")
    parser.add_argument("--batch-size", type=_positive_int, default=32, help="batch size (32)")
    parser.add_argument("--lr", type=float, default=1e-3, help="client Adam learning rate (1e-3)")
    parser.add_argument("--seed", type=int, default=0, help="seed for init, split, sampling (0)")
    parser.add_argument(
        "--standardize",
        action="store_true",
        help="z-score each channel per client, fitted on the client's training windows",
    )
    parser.add_argument("--out", required=True, help="run directory, e.g. runs/NAME")
    parser.add_argument(
        "--workers",
        type=_positive_int,
        default=1,
        help="local TFF worker processes; >1 splits each round's clients across them (1)",
    )
    parser.add_argument(
        "--remote-worker",
        action="append",
        default=[],
        metavar="HOST:PORT",
        help="a `fedprune worker` on another host (repeatable); needs --tls-ca/--tls-cert/"
        "--tls-key, or --insecure-remote",
    )
    parser.add_argument("--tls-ca", metavar="PEM", help="CA that signed the remote workers' certs")
    parser.add_argument("--tls-cert", metavar="PEM", help="client certificate for remote workers")
    parser.add_argument("--tls-key", metavar="PEM", help="private key of --tls-cert")
    parser.add_argument(
        "--insecure-remote",
        action="store_true",
        help="allow plain-text --remote-worker (unauthenticated, unencrypted)",
    )
    parser.add_argument(
        "--remote-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds a remote worker may take to answer (10)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument(
        "--verbose", action="store_true", help="show TensorFlow's own log lines (hidden)"
    )


def _add_pipeline_args(parser: argparse.ArgumentParser) -> None:
    """Options of the clustered/pruned pipeline; unset ones take the method's defaults."""
    add = parser.add_argument
    add(
        "--phases",
        type=_int_list(3),
        metavar="T0,T1,T2",
        help="rounds of FedAvg, dense cluster training, masked cluster training",
    )
    add("--clusters", type=_positive_int, help="clusters K")
    add("--prox", type=float, help="lambda of the proximal term, Eq. 5")
    add("--start-sparsity", type=float, help="sparsity after Phase-3 round 1 (CA-AFP)")
    add("--target-sparsity", type=float, help="final sparsity of the pruned kernels")
    add("--prune-frequency", type=_positive_int, help="update masks every f rounds (CA-AFP)")
    add("--churn", type=float, help="churn rate rho (CA-AFP)")
    for name, score in (("alpha", "magnitude"), ("beta", "coherence"), ("gamma", "consistency")):
        add(f"--{name}", type=float, help=f"weight of the {score} score (CA-AFP)")
    add(
        "--block",
        type=_positive_int,
        help="mask granularity: 1 = per weight; 16 = blocks TFLite stores compactly",
    )
    add(
        "--budget",
        choices=("global", "layerwise"),
        help="pruning budget: global = one ranking over all kernels (the paper's Alg. 1); "
        "layerwise = every kernel pruned to the target on its own (our extension, for export "
        "size)",
    )
    add(
        "--prune-layers",
        type=_name_list,
        metavar="NAME[,NAME...]",
        help="prune only the kernels of these layers (conv1, conv2, dense, probs; default: all, "
        "the paper); the sparsity targets then count only their weights, the other kernels stay "
        "dense (our extension, for export size)",
    )
    add(
        "--ft-epochs",
        type=_int_list(None),
        metavar="E[,E...]",
        help="fine-tuning epochs reported, all from one trained run",
    )
    parser.epilog = "Options not given take the method's defaults (the paper's Tables 5-6)."


PIPELINE_OPTIONS = (
    "phases",
    "clusters",
    "prox",
    "start_sparsity",
    "target_sparsity",
    "prune_frequency",
    "churn",
    "alpha",
    "beta",
    "gamma",
    "block",
    "budget",
    "prune_layers",
    "ft_epochs",
)


def add_reproduce_options(parser: argparse.ArgumentParser) -> None:
    """Options every ``fedprune reproduce`` target shares."""
    parser.add_argument("--quick", action="store_true", help="one seed instead of --seeds")
    parser.add_argument("--seeds", type=_positive_int, default=5, help="seeds 0..N-1 (5)")
    parser.add_argument("--out", default="results", help="output folder (results)")
    parser.add_argument("--data-dir", default=None, help="as for train")
    parser.add_argument(
        "--jobs", type=_positive_int, default=1, help="runs trained in parallel processes (1)"
    )


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
    _add_training_args(fedavg)
    fedavg.add_argument("--rounds", type=_positive_int, default=50, help="global rounds (50)")

    from fedprune.algorithms.descriptions import DESCRIPTIONS

    for method, (summary, description) in DESCRIPTIONS.items():
        sub = train.add_parser(method, help=summary, description=description)
        _add_training_args(sub)
        _add_pipeline_args(sub)
    clusterfl = train.add_parser(
        "clusterfl",
        help="ClusterFL baseline (dense, clustered multi-task learning by ADMM)",
        description="One model per client coupled by a learned cluster structure: local "
        "proximal steps on TFF, closed-form Omega step, spectral/k-means cluster step, dual "
        "step (fedprune/algorithms/clusterfl.py), then fine-tuning. Writes config.json, "
        "metrics.csv, clusters.json, personal_ft<E>.npz and summary.json; resumable.",
    )
    _add_training_args(clusterfl)
    from fedprune import cli_fedcref

    cli_fedcref.add_train_parser(train)
    clusterfl.add_argument("--rounds", type=_positive_int, default=50, help="rounds (50)")
    clusterfl.add_argument("--clusters", type=_positive_int, default=3, help="clusters K (3)")
    clusterfl.add_argument("--rho", type=float, default=5e-3, help="ADMM penalty rho (5e-3)")
    clusterfl.add_argument("--alpha", type=float, default=1e-3, help="alpha (1e-3)")
    clusterfl.add_argument("--beta", type=float, default=5e-4, help="beta (5e-4)")
    clusterfl.add_argument(
        "--ft-epochs",
        type=_int_list(None),
        default=(3, 25),
        metavar="E[,E...]",
        help="fine-tuning epochs reported (3,25)",
    )

    worker = commands.add_parser(
        "worker",
        help="serve a TFF worker to other hosts, behind mutual TLS",
        description="Runs a sandboxed TFF worker reachable only through mutual TLS on "
        "BIND:PORT; fedprune uses it with --remote-worker HOST:PORT --tls-ca/--tls-cert/"
        "--tls-key (README 'Remote workers').",
    )
    worker.add_argument("--port", type=int, required=True, help="TLS port (0: any free port)")
    worker.add_argument("--tls-cert", required=True, metavar="PEM", help="server certificate")
    worker.add_argument("--tls-key", required=True, metavar="PEM", help="its private key")
    worker.add_argument(
        "--client-ca", required=True, metavar="PEM", help="CA that must sign client certificates"
    )
    worker.add_argument("--bind", default=None, metavar="ADDR", help="address (default: all)")
    worker.add_argument("--log", default=None, metavar="FILE", help="TFF worker log file")

    reproduce = commands.add_parser("reproduce", help="regenerate a table of a paper")
    targets = reproduce.add_subparsers(dest="target", required=True)
    table2 = targets.add_parser(
        "table2",
        help="Table 2 of the CA-AFP paper on real UCI-HAR and WISDM",
        description="Trains every row of Table 2 (FedCHAR, EfficientFL, FedSNIP, CA-AFP "
        "(0,0,50) and (15,15,20)) on both datasets for every seed, fine-tuning 3 and 25 "
        "epochs from the same run, and writes table2.md, table2.csv and table2.png next to "
        "the paper's values. Finished runs are kept; rerun the command to resume.",
    )
    add_reproduce_options(table2)
    cli_fedcref.add_reproduce_parser(targets)
    return parser


def _reproduce(args: argparse.Namespace) -> None:
    if args.target == "fedcref":
        from fedprune.reproduce.fedcref import reproduce as reproduce_fedcref

        print(reproduce_fedcref(args.out, args.quick, args.seeds, args.data_dir, args.jobs))
        return
    from fedprune.reproduce.table2 import reproduce

    print(reproduce(args.out, args.quick, args.seeds, args.data_dir, args.jobs))


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
    from fedprune.quiet import quiet_environment, quiet_python_logging
    from fedprune.runs import check_out_dir, removed_unless_started

    quiet_environment(args.verbose)  # before TensorFlow is imported

    common = dict(
        dataset=args.dataset,
        clients_per_round=args.clients_per_round,
        local_epochs=args.local_epochs,
        batch_size=args.batch_size,
        learning_rate=args.lr,
        seed=args.seed,
        standardize=args.standardize,
    )
    if args.method == "fedavg":
        from fedprune.algorithms.fedavg import FedAvgConfig, run_fedavg

        config, runner = FedAvgConfig(rounds=args.rounds, **common), run_fedavg
        config.validate()
    elif args.method == "clusterfl":
        from fedprune.algorithms.clusterfl import ClusterFLConfig, run_clusterfl

        extra = {k: getattr(args, k) for k in ("rounds", "clusters", "rho", "alpha", "beta")}
        config = ClusterFLConfig(**common, **extra, ft_epochs=args.ft_epochs).resolved()
        runner = run_clusterfl
    else:
        from fedprune.algorithms.registry import METHODS, run_method

        factory, runner = METHODS[args.method][0], run_method
        overrides = {k: getattr(args, k) for k in PIPELINE_OPTIONS if getattr(args, k) is not None}
        dataset = common.pop("dataset")
        config = factory(dataset, **common, **overrides).resolved()
    quiet_python_logging()
    check_out_dir(args.out)
    with removed_unless_started(args.out):
        _install_and_run(args, config, runner)


def _install_and_run(args: argparse.Namespace, config: object, runner: object) -> None:
    """Start the TFF workers, train, stop the workers; print the summary."""
    from fedprune.engine import execution

    execution.install(
        num_local_workers=args.workers if not args.remote_worker else 0,
        remote_workers=tuple(args.remote_worker),
        log_dir=os.path.join(args.out, "tff-logs"),
        remote_tls=execution.RemoteTLS.from_options(args.tls_ca, args.tls_cert, args.tls_key),
        insecure_remote=args.insecure_remote,
        remote_timeout=args.remote_timeout,
    )
    try:
        summary = runner(config, args.out, args.data_dir, progress=not args.no_progress)
    finally:
        execution.shutdown()
    print(json.dumps(_brief(summary), indent=2))


def _worker(args: argparse.Namespace) -> None:
    from fedprune.engine import remote_worker  # standard library only: no TensorFlow here

    remote_worker.serve(args.port, args.tls_cert, args.tls_key, args.client_ca, args.bind, args.log)


def _brief(summary: dict) -> dict:
    """The summary without per-client lists (those stay in summary.json)."""
    brief = {k: v for k, v in summary.items() if k != "client_acc"}
    if "finetune" in brief:
        brief["finetune"] = {
            e: {k: v for k, v in r.items() if k != "client_acc"}
            for e, r in brief["finetune"].items()
        }
    return brief


def _close_progress_bars() -> None:
    """End any live tqdm bar's line, so that the message after it starts on its own line."""
    tqdm = sys.modules.get("tqdm")
    for bar in list(getattr(getattr(tqdm, "tqdm", None), "_instances", ()) or ()):
        bar.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "data":
            _data_stats(args)
        elif args.command == "train" and args.method == "fedcref":
            from fedprune import cli_fedcref

            cli_fedcref.run_train(args)
        elif args.command == "train":
            _train(args)
        elif args.command == "reproduce":
            _reproduce(args)
        elif args.command == "worker":
            _worker(args)
    except FedpruneError as err:
        _close_progress_bars()
        print(f"fedprune: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # e.g. a full disk or a permission denied while writing the run
        _close_progress_bars()
        print(f"fedprune: error: {err}; fix that and run the same command again", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        _close_progress_bars()
        print("fedprune: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
