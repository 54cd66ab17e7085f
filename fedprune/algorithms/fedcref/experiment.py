"""A FedCRef experiment: the simulated system (paper Sec. 5.2-5.4) or your own vectors, the
run, its files.

Builds the clients from a real dataset (``partition_clients``) and their initial clustering
(``dirty`` uniform with ``dirtiness``, or ``kmeans-ae``), both in
:mod:`fedprune.algorithms.fedcref.clients`, runs
:class:`~fedprune.algorithms.fedcref.algorithm.FedCRef` one iteration per step of the shared
round loop, and writes the run directory: ``config.json``, ``metrics.csv`` (one row per
iteration: mean client ACC, communities found vs true categories, wrong associations,
isolated clusters, active clients, wall time), ``checkpoint.npz`` (resume after an
interruption; removed once the run is finished), ``community_models.npz`` (the final
community autoencoders, for edge export), ``assignments.npz`` and ``summary.json`` (with the
``deploy`` manifest; :mod:`fedprune.algorithms.fedcref.record`). Ground-truth labels are used
here only to build the system and to evaluate it.

Your own data (``--dataset PATH.npz``, :func:`fedprune.data.tables.read_table_npz`: ``x``
(N, d), ``client_id`` (N,), optional classes ``y`` (N,)) replaces the simulated system
(:func:`~fedprune.algorithms.fedcref.clients.user_federation`): the clients are the file's
distinct client ids in ascending order (``client<i>`` of ``assignments.npz`` is the i-th, its
labels in the file's row order), each holding its rows of ``x`` as they are (float32; not
scaled). K_i is ``--local-k`` for every client, else the number of distinct classes in the
client's ``y``. The initial clustering is ``kmeans-ae`` by default; ``--init dirty`` needs
``y`` (it simulates a clustering from the classes). The paper's autoencoder ends in a sigmoid,
as the built-in images are scaled to [0, 1], so with it your vectors must lie in [0, 1] (scale
your features, e.g. min-max per feature, or bring your own autoencoder); values outside are
refused. ``y`` only scores the run; without it the run is the same and its files leave out
every label-based number.

``--local-k auto`` (either data): each client chooses its K_i from its own data, one shot,
before the first local clustering (:mod:`fedprune.algorithms.fedcref.local_k`), replacing the
simulated system's classes per client or your ``--local-k``. The choice is written to
``local_k.json`` (every client's silhouette per K and its K_i; with classes also their count
and the comparison) and the summary gains ``local_k_chosen`` (K_i in client order; ``mean_k``
is their mean) and, with classes, ``local_k_mean_abs_diff`` and ``local_k_exact_fraction``
(chosen K_i against each client's number of classes). A resumed run reads its K_i from
``local_k.json`` rather than choosing again (the same seed chooses the same K_i anyway).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from fedprune.algorithms.fedcref.algorithm import FedCRef, FedCRefState, IterationReport
from fedprune.algorithms.fedcref.clients import (
    Federation,
    LocalFits,
    RunClients,
    settled_dataset,
    simulated_clients,
)
from fedprune.algorithms.fedcref.evaluation import (
    majority_labels,
    mean_client_acc,
    wrong_association_pct,
)
from fedprune.algorithms.fedcref.record import described, run_summary
from fedprune.configs.fedcref import FedCRefRunConfig, SystemConfig
from fedprune.engine import interrupts
from fedprune.engine.compose import Inputs, RunPlan
from fedprune.engine.loop import Algorithm, RoundsResult, Schema, Step
from fedprune.models.spec import AutoencoderSpec
from fedprune.models.user import UserModel
from fedprune.runs import CHECKPOINT, RunDir, artefacts

__all__ = [
    "FedCRefIterations",
    "FedCRefRun",
    "run_fedcref_experiment",
    "simulated_clients",
    "summary_line",
]

# the per-iteration numbers that need the classes
LABEL_COLUMNS = ("acc", "true_categories", "wrong_assoc_pct")


class FedCRefIterations(Algorithm[FedCRefState]):
    """FedCRef's iterations on the shared loop: one :meth:`FedCRef.iterate` per step, its
    row (the module text), until the stopping rule ends the run (``Step.stop``) or
    ``--max-iterations``; the run's wall time in every row's ``wall_s``."""

    unit = "it"
    round_key = "iteration"
    wall_column = "wall_s"

    def __init__(
        self, algorithm: FedCRef, federation: Federation, system: SystemConfig, run: RunDir
    ):
        """``algorithm`` on ``federation``'s clients (scored with their classes where they
        have them) of ``system`` in ``run``: the progress bar names your table and its
        initial clustering, or the built-in dataset and its dirtiness; an inconsistent
        checkpoint is named by its path."""
        self.algorithm, self.labels = algorithm, federation.labels
        self.true_categories = federation.true_categories
        if federation.yours:
            self.desc = f"fedcref {federation.where} {system.init}"
        else:
            self.desc = f"fedcref {system.dataset} d={system.dirtiness}"
        self.where = str(run.path / CHECKPOINT)

    def describe(self, t: int) -> str:
        return self.desc

    def initial(self) -> FedCRefState:
        return self.algorithm.initial_state()

    def schema(self, arrays: dict) -> Schema:
        return self.algorithm.schema(arrays)

    def restore(self, rounds_done: int, arrays: dict, scalars: dict) -> FedCRefState:
        return FedCRefState.from_checkpoint(rounds_done, arrays, self.where)

    def finished(self, state: FedCRefState) -> bool:
        return state.done

    def step(self, t: int, state: FedCRefState) -> Step[FedCRefState]:
        labels = self.labels
        report: IterationReport = self.algorithm.iterate(state)
        row = {
            "iteration": report.iteration,
            "acc": None,
            "communities": len(report.communities),
            "true_categories": self.true_categories,
            "wrong_assoc_pct": None,
            "associations": len(report.edges),
            "isolated": len(report.isolated),
            "clusters": len(report.clusters),
            "active_clients": int(state.active.sum()),
            "seconds": round(report.seconds, 2),
        }
        if labels is None:
            row = {k: v for k, v in row.items() if k not in LABEL_COLUMNS}
        else:
            majority = majority_labels(report.clusters, report.members, labels)
            row["acc"] = round(mean_client_acc(labels, state.assignments), 6)
            row["wrong_assoc_pct"] = round(wrong_association_pct(report.edges, majority), 4)
        postfix = {"acc": str(row["acc"])} if labels is not None else {}
        postfix["comm"] = str(row["communities"])
        # nothing of an iteration during which SIGINT came is saved, even where TensorFlow
        # handled the KeyboardInterrupt itself (see fedprune.engine.interrupts)
        interrupts.raise_if_received()
        return Step(state, [row], {**postfix, "iso": str(row["isolated"])}, stop=state.done)


class FedCRefRun(RunPlan[FedCRefRunConfig], family=FedCRefRunConfig):
    """A FedCRef run for the composer (:mod:`fedprune.engine.compose`): the clients (your
    table, or the simulated system) with every check, your autoencoder, ``--local-k auto``'s
    choice (a resumed run's from its ``local_k.json``) and the initial clusterings, all
    before anything is written; then ``local_k.json``, the iterations, and the community
    models, assignments and summary. The checkpoint goes once the run is finished (its final
    state is in those files).

    Its runner, :func:`run_fedcref_experiment` (``config, out, data_dir=None, progress=True,
    *, table=None, model=None``), takes ``config.dataset``, a built-in image dataset (the
    simulated system) or the path of your own ``.npz`` table (module docstring), whose
    SHA-256 is recorded (a run directory made from other bytes is refused); ``table``, your
    table already loaded (a :class:`~fedprune.data.tables.ClientTable`), used instead of
    reading ``config.dataset`` (which must still name a ``.npz``: it is recorded, and its
    SHA-256 when the file exists); ``model``, your autoencoder (a
    :class:`~fedprune.models.user.UserModel`), ``model.fn(input_dim)`` returning an
    uncompiled ``tf.keras.Model`` whose output has its input's shape; ``config.model`` must
    name it (``user:<name>``). It is built and checked once before the run directory is
    made, and its architecture is written to the run's ``model.json``. Without it, a
    ``config.model`` of ``user:<name>`` is rebuilt from the run directory's ``model.json``
    (resuming).

    Every check of the configuration, the data and the model happens before the run
    directory is made, so a refused start leaves nothing that would refuse the corrected
    one. Without classes ``y`` the run iterates the same and writes the same files, without
    the per-iteration ``acc``, ``wrong_assoc_pct`` and ``true_categories`` and the summary's
    ``acc_init``, ``acc_final``, ``true_categories`` and ``wrong_assoc_pct``. Your table's
    summary has no ``split`` and lists the file's ``client_ids`` in client order
    (:mod:`fedprune.algorithms.fedcref.record`)."""

    keeps_checkpoint = False
    takes = ("table", "model")

    @classmethod
    def settle(
        cls, config: FedCRefRunConfig, out: Path, given: Mapping
    ) -> tuple[FedCRefRunConfig, dict]:
        """Your file's SHA-256 where the file exists; a table handed in needs
        ``config.dataset`` to name a ``.npz``
        (:func:`~fedprune.algorithms.fedcref.clients.settled_dataset`)."""
        return settled_dataset(config, out, given.get("table"))

    def __init__(self, config: FedCRefRunConfig, inputs: Inputs):
        super().__init__(config, inputs)
        self.system, self.params = system, params = config.system(), config.algorithm()
        self.trained = trained = inputs.model_of(config)
        federation = Federation.of_run(system, params.seed, inputs, trained)
        if isinstance(trained, UserModel):  # yours is checked once, before anything is trained
            spec = AutoencoderSpec(federation.input_dim, params.seed, model=trained)
            self.architecture = spec.keras()
        fits = LocalFits(system, params.seed, params.local_epochs, trained, inputs.progress)
        self.clients = RunClients.prepared(federation, fits, inputs.existing)

    def start(self, run: RunDir) -> tuple[FedCRefIterations, int]:
        clients, params, federation = self.clients, self.params, self.clients.federation
        clients.write_choice(run.path)
        xs, ks, bars = federation.xs, federation.ks, self.inputs.progress
        algorithm = FedCRef(xs, ks, clients.initial, params, model=self.trained, bars=bars)
        return FedCRefIterations(algorithm, federation, self.system, run), params.max_iterations

    def summary(self, run: RunDir, result: RoundsResult[FedCRefState]) -> dict:
        final, federation = result.state, self.clients.federation
        artefacts.write_community_models(run.path, final.community_models)
        artefacts.write_assignments(run.path, final.assignments)
        head = self.summary_head(described(self.config, federation))
        summary = run_summary(head, self.config, self.clients, final, run.metrics_rows())
        interrupts.raise_if_received()  # an interrupt during the last iteration: no summary
        return summary


run_fedcref_experiment = FedCRefRun.run
"""Run (or resume, or return the finished) FedCRef experiment of ``config`` in ``out``;
returns the summary (:class:`FedCRefRun` says what it takes and writes)."""


def summary_line(summary: Mapping) -> str:
    """One human line of a finished run (the label-based numbers where the run has them)."""
    scored = "acc_final" in summary
    acc = f"ACC {summary['acc_init']:.3f} -> {summary['acc_final']:.3f}, " if scored else ""
    found = f"/{summary['true_categories']}" if scored else ""
    wrong = f", wrong associations {summary['wrong_assoc_pct']:.1f} %" if scored else ""
    return (
        f"{acc}communities {summary['communities']}{found}{wrong}, isolated "
        f"{summary['isolated_start']} -> {summary['isolated_end']}, {summary['iterations']} "
        f"iterations ({summary['stop_reason']}), {summary['wall_s']:.0f} s"
    )
