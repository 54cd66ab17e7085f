"""The ``fedprune`` command line.

    fedprune data stats --dataset wisdm
    fedprune train fedavg --dataset uci_har --rounds 5 --clients-per-round 10 --out runs/NAME
    fedprune train fedcref --dataset mnist --dirtiness 0.3 --out runs/NAME

The ``train`` sub-commands come from the method registry (:mod:`fedprune.methods`), their
options from each method's configuration (:mod:`fedprune.configs.command_line`); every method
takes one path: options -> configuration -> ``--out`` checked -> workers -> runner.
Errors a user can fix are printed as one line (``fedprune: error: ...``) with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import fedprune
from fedprune.checks import MAX_COUNT
from fedprune.configs.command_line import add_config_options, argparse_type, config_from_options
from fedprune.configs.fields import int_tuple
from fedprune.configs.har import HAR_DATASETS
from fedprune.engine import interrupts
from fedprune.errors import FedpruneError
from fedprune.methods import METHODS
from fedprune.reproduce.studies import STUDIES

DATA_DIR_HELP = (
    "folder with the datasets' sub-folders (uci_har/, wisdm/, mnist/, ...) "
    "(default: $FEDPRUNE_DATA_DIR, else ./data; missing files are downloaded)"
)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if not 1 <= value <= MAX_COUNT:
        raise argparse.ArgumentTypeError(f"must be an integer in [1, {MAX_COUNT}], got {value}")
    return value


def _worker_count(text: str) -> int:
    """``--workers``: an integer from 1 to the CPUs this process may use."""
    from fedprune.workers.local import check_local_workers  # standard library only

    count = _positive_int(text)
    try:
        return check_local_workers(count)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _jobs(text: str) -> int | str:
    """``--jobs``: an integer >= 1, or ``auto`` (:mod:`fedprune.reproduce.auto_jobs`)."""
    if text == "auto":
        return text
    try:
        return _positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected 'auto' or an integer in [1, {MAX_COUNT}], got {text!r}"
        ) from None


def _port(text: str) -> int:
    """A TCP port for ``--port``: an integer in [0, 65535] (0: any free port)."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 65535], got {text!r}")
    return value


def _seconds(text: str) -> float:
    """A positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(
            f"must be a positive finite number of seconds, got {text!r}"
        )
    return value


def _host_port(text: str) -> str:
    """``HOST:PORT`` (``[IPv6]:PORT``) with a port in [1, 65535]; returned unchanged."""
    host, sep, port = text.rpartition(":")
    if not sep or not host.strip("[]") or not (port.isascii() and port.isdigit()):
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, e.g. node2:8443, got {text!r}")
    if not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"the port must be in [1, 65535], got {text!r}")
    return text


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    """Options of every ``fedprune train`` method that are not part of its configuration:
    where data and the run go, the TFF workers, the terminal."""
    files = parser.add_argument_group("data and run directory")
    files.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    files.add_argument("--out", required=True, help="run directory, e.g. runs/NAME")
    workers = parser.add_argument_group(
        "TFF workers", "where the rounds run: local sandboxed workers, or remote ones over TLS"
    )
    workers.add_argument(
        "--workers",
        type=_worker_count,
        default=1,
        help="local TFF worker processes, 1 to this machine's usable CPUs; >1 splits each "
        "round's clients across them (1)",
    )
    workers.add_argument(
        "--unsafe-open-workers",
        action="store_true",
        help="where the local workers' network sandbox is unavailable (no `unshare`, or user "
        "namespaces off), run them anyway, listening on loopback without authentication (any "
        "local user can reach them); needs a C compiler",
    )
    workers.add_argument(
        "--remote-worker",
        action="append",
        default=[],
        type=_host_port,
        metavar="HOST:PORT",
        help="a `fedprune worker` on another host (repeatable); needs --tls-ca/--tls-cert/"
        "--tls-key, or --insecure-remote",
    )
    workers.add_argument("--tls-ca", metavar="PEM", help="CA that signed the remote workers' certs")
    workers.add_argument("--tls-cert", metavar="PEM", help="client certificate for remote workers")
    workers.add_argument("--tls-key", metavar="PEM", help="private key of --tls-cert")
    workers.add_argument(
        "--insecure-remote",
        action="store_true",
        help="allow plain-text --remote-worker (unauthenticated, unencrypted)",
    )
    workers.add_argument(
        "--remote-timeout",
        type=_seconds,
        default=10.0,
        metavar="S",
        help="seconds a remote worker may take to answer (10)",
    )
    _add_output_options(parser)


def _add_output_options(parser: argparse.ArgumentParser) -> None:
    """What a command that trains prints: progress bars, TensorFlow's log, the summary."""
    output = parser.add_argument_group("output")
    output.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    output.add_argument(
        "--verbose", action="store_true", help="show TensorFlow's own log lines (hidden)"
    )
    output.add_argument(
        "--json", action="store_true", help="print summary.json instead of the short summary"
    )


def _add_train_parsers(train: argparse._SubParsersAction) -> None:
    """One sub-command per registered method; its options come from its configuration."""
    for method in METHODS.values():
        parser = train.add_parser(
            method.name,
            help=method.summary.replace("%", "%%"),
            description=method.description,
            epilog="Options not given take the defaults shown.",
        )
        add_config_options(parser, method.config, method.data)
        _add_run_options(parser)


def add_reproduce_options(
    parser: argparse.ArgumentParser,
    default_seeds: int | None = 5,
    quick: str = "seed 0 only",
    shown_seeds: int | None = None,
) -> None:
    """Options every ``fedprune reproduce`` target shares (``default_seeds=None``: the
    study's own number, the paper's, shown in the help as ``shown_seeds``)."""
    parser.add_argument("--quick", action="store_true", help=f"train less: {quick}")
    parser.add_argument(
        "--seeds",
        type=_positive_int,
        default=default_seeds,
        help=f"seeds 0..N-1 (default: {default_seeds or shown_seeds}; integer >= 1)",
    )
    parser.add_argument("--out", default="results", help="output folder (results)")
    parser.add_argument("--data-dir", default=None, help="as for train")
    parser.add_argument(
        "--jobs",
        type=_jobs,
        default=1,
        metavar="N|auto",
        help="runs trained (and, in the device study, exported) at a time, in their own "
        "processes (default: 1; integer >= 1, or auto: start with one and add runs while cores "
        "stand idle, measured on this machine; exports then run one at a time)",
    )
    parser.add_argument(
        "--unsafe-open-workers",
        action="store_true",
        help="as for train: every run's TFF workers may run outside the network sandbox, on "
        "loopback without authentication, where the sandbox is unavailable",
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
    stats.add_argument(
        "--dataset", required=True, choices=HAR_DATASETS, help="which HAR dataset to use"
    )
    stats.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    stats.add_argument("--json", action="store_true", help="print JSON instead of a table")

    train = commands.add_parser("train", help="train a federated model").add_subparsers(
        dest="method", required=True
    )
    _add_train_parsers(train)

    worker = commands.add_parser(
        "worker",
        help="serve a TFF worker to other hosts, behind mutual TLS",
        description="Runs a sandboxed TFF worker reachable only through mutual TLS on "
        "BIND:PORT; fedprune uses it with --remote-worker HOST:PORT --tls-ca/--tls-cert/"
        "--tls-key (docs/engine.md 'Remote workers').",
    )
    worker.add_argument(
        "--port", type=_port, required=True, help="TLS port, 0-65535 (0: any free port)"
    )
    worker.add_argument("--tls-cert", required=True, metavar="PEM", help="server certificate")
    worker.add_argument("--tls-key", required=True, metavar="PEM", help="its private key")
    worker.add_argument(
        "--client-ca", required=True, metavar="PEM", help="CA that must sign client certificates"
    )
    worker.add_argument("--bind", default=None, metavar="ADDR", help="address (default: all)")
    worker.add_argument("--log", default=None, metavar="FILE", help="TFF worker log file")

    finetune = commands.add_parser(
        "finetune",
        help="fine-tune a finished HAR run again for other lengths (no new rounds)",
        description="Fine-tunes the personal models of a finished caafp, global_ft, fedchar, "
        "efficientfl, fedsnip or clusterfl run again, from what the run kept (its cluster "
        "models and masks, or ClusterFL's client models), for the lengths of --ft-epochs, "
        "into a new run directory: no federated round is trained again. Same seed and "
        "settings as the run, so a length it already has gives the same numbers. Writes "
        "config.json, personal_ft<E>.npz and summary.json, with copies of the run's "
        "metrics.csv, checkpoint.npz, clusters.json, masks.npz and cluster_models.npz, to --out.",
    )
    finetune.add_argument("run", help="the finished run's folder (the --out it was trained into)")
    finetune.add_argument(
        "--ft-epochs",
        required=True,
        type=argparse_type(int_tuple()),
        metavar="E[,E...]",
        help="fine-tuning lengths, all from one pass (integers >= 0, e.g. 0,1,3,5,10,25)",
    )
    finetune.add_argument("--out", required=True, help="new run directory, e.g. runs/NAME-ft")
    finetune.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    _add_output_options(finetune)

    plot = commands.add_parser(
        "plot",
        help="draw runs' per-round curves into one PNG",
        description="One PNG of the per-round numbers in the runs' metrics.csv (accuracy, "
        "loss, sparsity, communication, clusters), several runs overlaid. `fedprune train` "
        "writes one for its run as curves.png; `tensorboard --logdir RUN` shows the same "
        "numbers per cluster, live.",
    )
    plot.add_argument("runs", nargs="+", metavar="RUN", help="run directories (their --out)")
    plot.add_argument(
        "--out",
        default=None,
        metavar="PNG",
        help="the picture to write: a .png name, or a folder (FOLDER/curves.png) (default: "
        "RUN/curves.png for one run, curves.png here for several)",
    )

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
    table2.add_argument(
        "--split",
        choices=("time-ordered", "random"),
        default="time-ordered",
        help="the per-client split of every run (default: time-ordered; random measures the "
        "leak of overlapping windows and writes table2_random.*)",
    )
    fedcref = targets.add_parser(
        "fedcref",
        help="Tables 5-6 and Figure 8 of the FedCRef paper on real MNIST-family data",
        description="Runs FedCRef with dirtiness 0, 0.3 and 0.5 on MNIST (EMNIST stand-in), "
        "Fashion-MNIST and KMNIST-test for every seed and writes fedcref_table.md/.csv and "
        "fedcref_iterations.png next to the paper's values. Finished runs are kept; rerun "
        "the command to resume.",
    )
    add_reproduce_options(fedcref)
    for name, command in STUDIES.items():
        study = targets.add_parser(
            name,
            help=command.summary,
            description=command.description
            + " Finished runs are kept; rerun the command to resume.",
        )
        add_reproduce_options(
            study, default_seeds=None, quick=command.quick, shown_seeds=command.seeds
        )
    return parser


def _reproduce(args: argparse.Namespace) -> None:
    """One process per study and ``--out`` (each run it trains takes its own lock too)."""
    from fedprune.runs.lock import FolderLock
    from fedprune.workers.local import require_sandbox

    require_sandbox(args.unsafe_open_workers)  # refused here, not at the first run
    if args.unsafe_open_workers:
        os.environ[UNSAFE_OPEN_WORKERS_ENV] = "1"  # the runs are child processes
    with FolderLock(args.out, "--out", name=f".fedprune-reproduce-{args.target}.lock"):
        _reproduce_study(args)


def _reproduce_study(args: argparse.Namespace) -> None:
    if args.target in STUDIES:
        from fedprune.reproduce.studies import study
        from fedprune.reproduce.study import reproduce as reproduce_study

        print(
            reproduce_study(
                study(args.target), args.out, args.quick, args.seeds, args.data_dir, args.jobs
            )
        )
        return
    if args.target == "fedcref":
        from fedprune.reproduce.fedcref import reproduce as reproduce_fedcref

        print(reproduce_fedcref(args.out, args.quick, args.seeds, args.data_dir, args.jobs))
        return
    from fedprune.reproduce.table2 import reproduce

    print(reproduce(args.out, args.quick, args.seeds, args.data_dir, args.jobs, args.split))


def _data_stats(args: argparse.Namespace) -> None:
    from fedprune.data.registry import load_windows
    from fedprune.data.stats import heterogeneity, split_counts

    windows = load_windows(args.dataset, args.data_dir)
    h, splits = heterogeneity(windows), split_counts(windows)
    if args.json:
        import dataclasses

        value = {**dataclasses.asdict(h), "splits": [dataclasses.asdict(s) for s in splits]}
        print(json.dumps(value, indent=2))
        return
    print(f"{args.dataset}: {h.num_clients} clients")
    rows = h.rows() + [s.row() for s in splits]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")


def _train(args: argparse.Namespace) -> None:
    """Build the method's configuration (a bad value fails here, before anything is made),
    check ``--out``, then run the method's trainer (:mod:`fedprune.api`, the same object the
    Python API gives) on the TFF workers the options name."""
    from fedprune.quiet import quiet_environment, quiet_python_logging

    quiet_environment(args.verbose)  # before TensorFlow is imported
    method = METHODS[args.method]
    config = config_from_options(method.config, args, f"`fedprune train {method.name}`")
    if not args.remote_worker:  # local workers: sandboxed, or refused before anything is made
        from fedprune.workers.local import require_sandbox

        require_sandbox(_unsafe_open_workers(args))
    from fedprune.runs.finished import finished_as_configured
    from fedprune.runs.run_dir import check_out_dir

    check_out_dir(args.out)
    summary = finished_as_configured(config, args.out)
    if summary is not None:  # answered without TensorFlow, workers or data
        _print_summary(summary, args)
        return
    from fedprune.api.trainer import Trainer, Workers
    from fedprune.workers.execution import RemoteTLS, check_remote

    quiet_python_logging()
    workers = Workers(
        local=args.workers if not args.remote_worker else 0,
        remote=tuple(args.remote_worker),
        tls=RemoteTLS.from_options(args.tls_ca, args.tls_cert, args.tls_key),
        insecure_remote=args.insecure_remote,
        remote_timeout=args.remote_timeout,
        unsafe_open=_unsafe_open_workers(args),
    )
    check_remote(workers.remote, workers.tls, workers.insecure_remote, announce=False)
    if not args.no_progress:  # the first progress bar comes after these (seconds)
        print(
            f"fedprune: {method.name} on {config.dataset}: starting TensorFlow and the TFF "
            "worker, then loading the data",
            file=sys.stderr,
            flush=True,
        )
    result = Trainer(method, config).run(
        args.out,
        data_dir=args.data_dir,
        progress=not args.no_progress,
        workers=workers,
        verbose=args.verbose,
    )
    _print_summary(result.summary, args)


def _print_summary(summary: dict, args: argparse.Namespace) -> None:
    """The run's short human summary, or with ``--json`` its ``summary.json``."""
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    from fedprune.runs.report import describe

    print(describe(summary, args.out))


def _plot(args: argparse.Namespace) -> None:
    from fedprune.runs.plot import PLOT, plot_runs

    out = args.out or (Path(args.runs[0]) / PLOT if len(args.runs) == 1 else Path(PLOT))
    print(plot_runs(args.runs, out))


def _finetune(args: argparse.Namespace) -> None:
    """Check the source run, the lengths and ``--out``, then fine-tune (no TFF workers: it
    is local training only)."""
    from fedprune.quiet import quiet_environment, quiet_python_logging

    quiet_environment(args.verbose)  # before TensorFlow is imported
    from fedprune.runs import check_out_dir, owned_run_dir

    quiet_python_logging()
    check_out_dir(args.out)
    from fedprune.algorithms.refinetune import refinetune

    with owned_run_dir(args.out):  # every check passes before anything is made
        summary = refinetune(
            args.run, args.ft_epochs, args.out, args.data_dir, progress=not args.no_progress
        )
    _print_summary(summary, args)


UNSAFE_OPEN_WORKERS_ENV = "FEDPRUNE_UNSAFE_OPEN_WORKERS"


def _unsafe_open_workers(args: argparse.Namespace) -> bool:
    """``--unsafe-open-workers``, or ``FEDPRUNE_UNSAFE_OPEN_WORKERS=1`` (how ``fedprune
    reproduce --unsafe-open-workers`` hands the choice to the runs it trains)."""
    return args.unsafe_open_workers or os.environ.get(UNSAFE_OPEN_WORKERS_ENV) == "1"


def _worker(args: argparse.Namespace) -> None:
    from fedprune.workers import remote as remote_worker  # standard library only: no TensorFlow

    remote_worker.serve(args.port, args.tls_cert, args.tls_key, args.client_ca, args.bind, args.log)


def _close_progress_bars() -> None:
    """End any live tqdm bar's line, so that the message after it starts on its own line."""
    tqdm = sys.modules.get("tqdm")
    for bar in list(getattr(getattr(tqdm, "tqdm", None), "_instances", ()) or ()):
        bar.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    interrupts.install()
    try:
        if args.command == "data":
            _data_stats(args)
        elif args.command == "train":
            _train(args)
        elif args.command == "reproduce":
            _reproduce(args)
        elif args.command == "worker":
            _worker(args)
        elif args.command == "finetune":
            _finetune(args)
        elif args.command == "plot":
            _plot(args)
    except FedpruneError as err:
        _close_progress_bars()
        print(f"fedprune: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # e.g. a full disk or a permission denied while writing the run
        _close_progress_bars()
        print(f"fedprune: error: {err}; fix that and run the same command again", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return _interrupted()
    except Exception:
        if not interrupts.received():
            raise
        # the interrupt, changed on its way up (e.g. by TF's graph tracing): see interrupts
        return _interrupted()
    return 0


def _interrupted() -> int:
    _close_progress_bars()
    print("fedprune: interrupted; run the same command again to resume", file=sys.stderr)
    return 130


def exit_with(code: int) -> None:
    """Exit with ``code``; after an interrupt without the interpreter's final garbage
    collection, which with TF and abandoned TFF calls took over 10 s in 1 of 12 interrupted
    FedCRef runs. Everything of the run is on disk by then (files are written whole and
    closed); the exit handlers (stopping the TFF workers) still run, and the streams are
    flushed."""
    if code != 130:
        sys.exit(code)
    import atexit

    # No teardown follows os._exit, so TFF's contexts need no releasing; releasing them would
    # free the abandoned TFF call's pending asyncio task, which logs "Task was destroyed but
    # it is pending!" after the interrupted line.
    atexit.unregister(fedprune.release_tff_at_exit)
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run() -> None:
    """The ``fedprune`` command: :func:`main`, then exit with its status."""
    exit_with(main())


if __name__ == "__main__":
    run()
