"""FedAvg (McMahan et al. 2017) on the natural HAR partition: CA-AFP's Phase 1 alone (Eq. 2).

Each round samples ``clients_per_round`` clients (seeded by (seed, round)), runs
``local_epochs`` epochs of Adam on each, and averages the models weighted by data size.
The model every client is evaluated with is the final global model.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import tensorflow_federated as tff
from tqdm import tqdm

from fedprune.checks import check_count, check_positive, check_seed
from fedprune.communication import eq13_bytes
from fedprune.data.registry import load_federated
from fedprune.engine.evaluation import client_accuracies
from fedprune.engine.process import ModelSpec, build_fedavg_process
from fedprune.engine.rounds import run_round, sample_clients
from fedprune.metrics import fairness
from fedprune.runs import RunDir


@dataclasses.dataclass(frozen=True)
class FedAvgConfig:
    """Hyper-parameters (defaults: the CA-AFP paper's Tables 5-6)."""

    dataset: str
    rounds: int = 50
    clients_per_round: int = 10
    local_epochs: int = 3
    batch_size: int = 32
    learning_rate: float = 1e-3
    seed: int = 0
    standardize: bool = False
    method: str = "fedavg"

    def validate(self) -> None:
        for name in ("rounds", "clients_per_round", "local_epochs", "batch_size"):
            check_count(name, getattr(self, name))
        check_positive("lr", self.learning_rate)
        check_seed(self.seed)


def run_fedavg(
    config: FedAvgConfig,
    out: str | Path,
    data_dir: str | Path | None = None,
    progress: bool = True,
) -> dict:
    """Train (or resume, or return the finished) FedAvg run in ``out``; returns the summary."""
    config.validate()
    run = RunDir(out, dataclasses.asdict(config))
    if run.finished:
        return run.read_summary()
    data = load_federated(config.dataset, config.seed, data_dir, config.standardize)
    spec = ModelSpec(data.input_shape, data.num_classes, config.seed)
    process = build_fedavg_process(spec, config.local_epochs, config.learning_rate)
    state = process.initialize()
    params = int(sum(w.size for w in spec.initial_weights().trainable))
    by_id = {c.client_id: c for c in data.clients}

    done, wall_before, comm = 0, 0.0, 0.0
    checkpoint = run.load_checkpoint()
    if checkpoint is not None:
        done, arrays, scalars = checkpoint
        state = process.set_model_weights(
            state,
            tff.learning.models.ModelWeights(
                trainable=arrays["trainable"], non_trainable=arrays.get("non_trainable", [])
            ),
        )
        wall_before, comm = scalars["wall_s"], scalars["comm_bytes"]
    run.truncate_metrics(done)

    start = time.perf_counter()
    bar = tqdm(
        range(done + 1, config.rounds + 1),
        initial=done,
        total=config.rounds,
        desc=f"{config.method} {config.dataset}",
        unit="round",
        disable=not progress,
    )
    for round_num in bar:
        ids = sample_clients(list(by_id), config.clients_per_round, config.seed, round_num)
        t0 = time.perf_counter()
        output = run_round(
            process, state, [by_id[i] for i in ids], round_num, config.seed, config.batch_size
        )
        state = output.state
        train = output.metrics["client_work"]["train"]
        comm += 2 * len(ids) * eq13_bytes(params, 0.0)
        row = {
            "round": round_num,
            "clients": len(ids),
            "train_loss": float(train["train_loss"]),
            "train_accuracy": float(train["train_accuracy"]),
            "examples": int(train["train_examples"]),
            "round_s": round(time.perf_counter() - t0, 3),
            "comm_mb_eq13": comm / 1e6,
        }
        run.append_metrics(row)
        weights = process.get_model_weights(state)
        run.save_checkpoint(
            round_num,
            {"trainable": weights.trainable, "non_trainable": weights.non_trainable},
            {"wall_s": wall_before + time.perf_counter() - start, "comm_bytes": comm},
        )
        bar.set_postfix(loss=f"{row['train_loss']:.3f}", acc=f"{row['train_accuracy']:.3f}")
    bar.close()

    weights = process.get_model_weights(state)
    client_acc = client_accuracies(spec.keras(), data.clients, list(weights.trainable))
    summary = {
        "method": config.method,
        "dataset": config.dataset,
        "seed": config.seed,
        "rounds": config.rounds,
        "num_clients": data.num_clients,
        "params": params,
        "avg_acc": sum(client_acc.values()) / len(client_acc),
        "fairness": fairness(client_acc),
        "client_acc": {str(k): v for k, v in client_acc.items()},
        "comm_mb_eq13": comm / 1e6,
        "wall_s": wall_before + time.perf_counter() - start,
    }
    run.write_summary(summary)
    return summary
