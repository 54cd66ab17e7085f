"""``fedprune train fedcref`` and ``fedprune reproduce fedcref``: options and entry points."""

from __future__ import annotations

import argparse
import json
import os

from fedprune.data.images import NAMES

DESCRIPTION = (
    "FedCRef (Nardi et al.): unsupervised federated clustering. Each of N clients holds K_i "
    "unlabeled classes (K_i uniform in [2, K_G/2]) with S images each and starts from a "
    "local clustering (dirty uniform with --dirtiness, or k-means on autoencoder codes); "
    "per-cluster autoencoders are exchanged, associated by reconstruction error (alpha, "
    "theta), grouped into communities trained with FedAvg on TFF, and used to refine every "
    "client's clusters until clients are stable (tau) or the community counts settle. "
    "Writes config.json, metrics.csv (per iteration), community_models.npz, "
    "assignments.npz and summary.json to --out; re-running resumes an interrupted run. "
    "Labels only build the system and evaluate it."
)


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {value}")
    return value


def add_train_parser(train: argparse._SubParsersAction) -> None:
    """The ``train fedcref`` sub-command."""
    p = train.add_parser(
        "fedcref", help="FedCRef unsupervised federated clustering", description=DESCRIPTION
    )
    add = p.add_argument
    add("--dataset", default="mnist", choices=NAMES, help="image dataset (mnist)")
    add(
        "--split",
        default="train",
        choices=("train", "test"),
        help="dataset split the clients are drawn from (train; KMNIST here: test)",
    )
    add(
        "--data-dir",
        default=None,
        help="folder with <dataset>/ sub-folders "
        "(default: $FEDPRUNE_DATA_DIR, else ./data; missing files are downloaded)",
    )
    add("--clients", type=int, default=25, help="clients N (25)")
    add("--samples-per-class", type=int, default=500, help="images per class and client S (500)")
    add(
        "--max-classes",
        type=int,
        default=None,
        help="largest K_i (classes per client); K_i is uniform in [2, this] (default K_G/2)",
    )
    add("--overlap", type=_fraction, default=0.0, help="shared fraction O of a class (0)")
    add(
        "--init",
        default="dirty",
        choices=("dirty", "kmeans-ae"),
        help="initial local clustering: simulated dirty uniform, or k-means on autoencoder "
        "codes with K_i given (dirty)",
    )
    add("--dirtiness", type=float, default=0.3, help="misassigned fraction for --init dirty (0.3)")
    add("--alpha", type=float, default=75.0, help="percentile of the association test (75)")
    add("--theta", type=float, default=0.2, help="association threshold in [0, 1] (0.2)")
    add("--tau", type=float, default=0.8, help="client stability threshold on ACC (0.8)")
    add("--epochs", type=int, default=20, help="local autoencoder epochs (20)")
    add("--fl-rounds", type=int, default=15, help="FedAvg rounds per community (15)")
    add("--fl-local-epochs", type=int, default=1, help="local epochs per FedAvg round (1)")
    add("--batch-size", type=int, default=32, help="batch size (32)")
    add("--lr", type=float, default=1e-3, help="Adam learning rate (1e-3)")
    add("--max-iterations", type=int, default=30, help="safety cap on iterations (30)")
    add("--seed", type=int, default=0, help="seed of the system, initial clusters, models (0)")
    add("--out", required=True, help="run directory, e.g. runs/NAME")
    add("--no-progress", action="store_true", help="hide the progress bar")
    add("--verbose", action="store_true", help="show TensorFlow's own log lines (hidden)")


def run_train(args: argparse.Namespace) -> None:
    """Run (or resume) one FedCRef experiment and print its summary."""
    from fedprune.quiet import quiet_environment, quiet_python_logging

    quiet_environment(args.verbose)  # before TensorFlow is imported
    from fedprune.algorithms.fedcref import FedCRefConfig
    from fedprune.algorithms.fedcref.experiment import SystemConfig, run_fedcref_experiment
    from fedprune.engine import execution
    from fedprune.runs import check_out_dir, removed_unless_started

    quiet_python_logging()

    system = SystemConfig(
        dataset=args.dataset,
        split=args.split,
        num_clients=args.clients,
        samples_per_class=args.samples_per_class,
        overlap=args.overlap,
        init=args.init,
        dirtiness=args.dirtiness,
        max_classes=args.max_classes,
    )
    config = FedCRefConfig(
        alpha=args.alpha,
        theta=args.theta,
        tau=args.tau,
        local_epochs=args.epochs,
        fl_rounds=args.fl_rounds,
        fl_local_epochs=args.fl_local_epochs,
        batch_size=args.batch_size,
        learning_rate=args.lr,
        max_iterations=args.max_iterations,
        seed=args.seed,
    )
    check_out_dir(args.out)
    with removed_unless_started(args.out):
        execution.install(log_dir=os.path.join(args.out, "tff-logs"))
        try:
            summary = run_fedcref_experiment(
                system, config, args.out, args.data_dir, progress=not args.no_progress
            )
        finally:
            execution.shutdown()
    print(json.dumps(summary, indent=2))


def add_reproduce_parser(targets: argparse._SubParsersAction) -> None:
    """The ``reproduce fedcref`` sub-command."""
    p = targets.add_parser(
        "fedcref",
        help="Tables 5-6 and Figure 8 of the FedCRef paper on real MNIST-family data",
        description="Runs FedCRef with dirtiness 0, 0.3 and 0.5 on MNIST (EMNIST stand-in), "
        "Fashion-MNIST and KMNIST-test for every seed and writes fedcref_table.md/.csv and "
        "fedcref_iterations.png next to the paper's values. Finished runs are kept; rerun "
        "the command to resume.",
    )
    from fedprune.cli import add_reproduce_options

    add_reproduce_options(p)
