"""FedAvg (McMahan et al. 2017) on the natural HAR partition: CA-AFP's Phase 1 alone (Eq. 2).

Each round samples ``clients_per_round`` clients (seeded by (seed, round)), runs
``local_epochs`` epochs of Adam on each, and averages the models weighted by data size.
The model every client is evaluated with is the final global model.

A run (:func:`run_fedavg`) is :class:`FedAvgRun` on the run composer
(:mod:`fedprune.engine.compose`), its rounds :class:`FedAvgRounds` on the shared loop.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import tensorflow_federated as tff

from fedprune.algorithms.caafp.communication import eq13_bytes
from fedprune.configs.fedavg import FedAvgConfig
from fedprune.configs.protocol import dataset_label
from fedprune.data.partition import FederatedData
from fedprune.data.registry import har_recipe
from fedprune.engine.evaluation import client_accuracies
from fedprune.engine.har_run import HarRun
from fedprune.engine.held_out import COLUMN, HeldOut
from fedprune.engine.loop import Algorithm, RoundsResult, Schema, Step
from fedprune.engine.metrics import fairness, noise_summary
from fedprune.engine.process import build_fedavg_process
from fedprune.engine.rounds import run_round, sample_clients
from fedprune.models.spec import ModelSpec
from fedprune.runs import RunDir
from fedprune.runs.deploy import har_manifest


@dataclasses.dataclass
class FedAvgState:
    """The global model (numpy) and the Eq. 13 bytes sent so far."""

    trainable: list[np.ndarray]
    non_trainable: list[np.ndarray]
    comm_bytes: float = 0.0

    def to_checkpoint(self) -> tuple[dict, dict]:
        arrays = {"trainable": self.trainable, "non_trainable": self.non_trainable}
        return arrays, {"comm_bytes": self.comm_bytes}

    @classmethod
    def from_checkpoint(cls, _rounds: int, arrays: dict, scalars: dict) -> FedAvgState:
        return cls(arrays["trainable"], arrays.get("non_trainable", []), scalars["comm_bytes"])

    @staticmethod
    def schema(spec: ModelSpec) -> Schema:
        """What a checkpoint of this state holds for the model of ``spec``: its weights."""
        return Schema(weight_shapes(spec))


def weight_shapes(spec: ModelSpec) -> dict[str, list[tuple[int, ...]]]:
    """The shapes of a FedAvg checkpoint's arrays for the model of ``spec``."""
    weights = spec.initial_weights()
    return {
        "trainable": [tuple(np.shape(w)) for w in weights.trainable],
        "non_trainable": [tuple(np.shape(w)) for w in weights.non_trainable],
    }


class FedAvgRounds(Algorithm[FedAvgState]):
    """FedAvg's rounds on the composer's loop: sample, train, average (the module text)."""

    def __init__(self, config: FedAvgConfig, data: FederatedData, spec: ModelSpec):
        self.config, self.spec = config, spec
        self.process = build_fedavg_process(spec, config.local_epochs, config.learning_rate)
        self.params = int(sum(w.size for w in spec.initial_weights().trainable))
        self.by_id = {c.client_id: c for c in data.clients}
        self.held_out = HeldOut(config.eval_every, config.rounds, spec.keras, self.by_id)
        self.base = self.process.initialize()  # stateless server and aggregator: weights only

    def describe(self, t: int) -> str:
        return f"{self.config.method} {dataset_label(self.config.dataset)}"

    def initial(self) -> FedAvgState:
        weights = self.spec.initial_weights()
        return FedAvgState(list(weights.trainable), list(weights.non_trainable))

    def schema(self, arrays: dict) -> Schema:
        return FedAvgState.schema(self.spec)

    def restore(self, rounds_done: int, arrays: dict, scalars: dict) -> FedAvgState:
        return FedAvgState.from_checkpoint(rounds_done, arrays, scalars)

    def step(self, t: int, state: FedAvgState) -> Step[FedAvgState]:
        config, process, by_id = self.config, self.process, self.by_id
        ids = sample_clients(list(by_id), config.clients_per_round, config.seed, t)
        start = process.set_model_weights(
            self.base, tff.learning.models.ModelWeights(state.trainable, state.non_trainable)
        )
        began = time.perf_counter()
        output = run_round(
            process, start, [by_id[i] for i in ids], t, config.seed, config.batch_size
        )
        seconds = time.perf_counter() - began
        weights = process.get_model_weights(output.state)
        comm = state.comm_bytes + 2 * len(ids) * eq13_bytes(self.params, 0.0)
        train = output.metrics["client_work"]["train"]
        row = {
            "round": t,
            "clients": len(ids),
            "train_loss": float(train["train_loss"]),
            "train_accuracy": float(train["train_accuracy"]),
            "examples": int(train["train_examples"]),
            "round_s": round(seconds, 3),
            "comm_mb_eq13": comm / 1e6,
        }
        new = FedAvgState(
            [np.asarray(w) for w in weights.trainable],
            [np.asarray(w) for w in weights.non_trainable],
            comm,
        )
        if self.held_out.due(t):
            row[COLUMN] = self.held_out.accuracy(new.trainable, sorted(by_id))
        postfix = {"loss": f"{row['train_loss']:.3f}", "acc": f"{row['train_accuracy']:.3f}"}
        return Step(new, [row], postfix)


class FedAvgRun(HarRun[FedAvgConfig], family=FedAvgConfig):
    """A FedAvg run for the composer (:mod:`fedprune.engine.compose`): the HAR run's data,
    checks and model (:class:`~fedprune.engine.har_run.HarRun`); then the rounds and the
    summary."""

    def start(self, run: RunDir) -> tuple[FedAvgRounds, int]:
        self.rounds = FedAvgRounds(self.config, self.data, self.spec)
        return self.rounds, self.config.rounds

    def summary(self, run: RunDir, result: RoundsResult[FedAvgState]) -> dict:
        config, data, comm = self.config, self.data, result.state.comm_bytes
        client_acc = client_accuracies(self.keras, data.clients, result.state.trainable)
        summary = {
            **self.har_summary(result, self.rounds.params),
            "rounds": config.rounds,
            "avg_acc": sum(client_acc.values()) / len(client_acc),
            "fairness": fairness(client_acc),
            "client_acc": {str(k): v for k, v in client_acc.items()},
            "comm_mb_eq13": comm / 1e6,
            "comm_mib_eq13": comm / 1024**2,  # the paper's unit
            "deploy": har_manifest(
                "global",
                har_recipe(config),
                data.input_shape,
                data.class_names,
                model=self.spec.recorded_model,
            ).to_json(),
        }
        if data.noisy_clients:
            summary["label_noise"] = noise_summary(data.noisy_clients, client_acc)
        return summary


run_fedavg = FedAvgRun.run
"""Train (or resume, or return the finished) FedAvg run of ``config`` in ``out``
(``run_fedavg(config, out, data_dir=None, progress=True, model=None)``); returns the summary.
``model``: your own model (:mod:`fedprune.models.user`), as ``config.model`` names it."""
