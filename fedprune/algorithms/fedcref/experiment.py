"""A FedCRef experiment: the simulated system (paper Sec. 5.2-5.4) or your own vectors, the
run, its files.

Builds the clients from a real dataset (``partition_clients``), the initial clustering
(``dirty`` uniform with ``dirtiness``, or ``kmeans-ae``), runs
:class:`~fedprune.algorithms.fedcref.algorithm.FedCRef` one iteration per step of the shared
round loop, and writes the run directory: ``config.json``, ``metrics.csv`` (one row per
iteration: mean client ACC, communities found vs true categories, wrong associations,
isolated clusters, active clients, wall time), ``checkpoint.npz`` (resume after an
interruption; removed once the run is finished), ``community_models.npz`` (the final
community autoencoders, for edge export), ``assignments.npz`` and ``summary.json`` (with the
``deploy`` manifest). Ground-truth labels are used here only to build the system and to
evaluate it.

Your own data (``--dataset PATH.npz``, :func:`fedprune.data.tables.read_table_npz`: ``x``
(N, d), ``client_id`` (N,), optional classes ``y`` (N,)) replaces the simulated system
(:func:`user_federation`): the clients are the file's distinct client ids in ascending order
(``client<i>`` of ``assignments.npz`` is the i-th, its labels in the file's row order), each
holding its rows of ``x`` as they are (float32; not scaled). K_i is ``--local-k`` for every
client, else the number of distinct classes in the client's ``y``. The initial clustering is
``kmeans-ae`` by default; ``--init dirty`` needs ``y`` (it simulates a clustering from the
classes). The paper's autoencoder ends in a sigmoid, as the built-in images are scaled to
[0, 1], so with it your vectors must lie in [0, 1] (scale your features, e.g. min-max per
feature, or bring your own autoencoder); values outside are refused. ``y`` only scores the
run; without it the run is the same and its files leave out every label-based number.

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

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

import numpy as np
from tqdm import tqdm

from fedprune.algorithms.fedcref.algorithm import (
    FedCRef,
    FedCRefState,
    IterationReport,
    validate_inputs,
)
from fedprune.algorithms.fedcref.evaluation import (
    majority_labels,
    mean_client_acc,
    wrong_association_pct,
)
from fedprune.algorithms.fedcref.initial import kmeans_on_embeddings
from fedprune.algorithms.fedcref.local_k import (
    LocalKChoice,
    check_choosable,
    choose_from_data,
    comparison,
    local_k_record,
    read_local_k,
    write_local_k,
)
from fedprune.algorithms.fedcref.local_models import LocalTrainer, cluster_seed
from fedprune.algorithms.fedcref.system_size import check_fits
from fedprune.configs.fedcref import AUTO, DEFAULT_MODEL, FedCRefRunConfig, SystemConfig
from fedprune.configs.protocol import dataset_label, is_user_file
from fedprune.data.clustered_partition import ClientImages, dirty_uniform, partition_clients
from fedprune.data.images import load_images
from fedprune.data.tables import ClientTable, read_table_npz
from fedprune.engine import interrupts
from fedprune.engine.compose import Inputs, RunPlan, settled_file
from fedprune.engine.loop import Algorithm, RoundsResult, Schema, Step
from fedprune.errors import ConfigError, DataError
from fedprune.models.spec import AutoencoderSpec
from fedprune.models.user import UserModel
from fedprune.runs import CHECKPOINT, RunDir, artefacts
from fedprune.runs.deploy import DeployManifest, image_clients_recipe
from fedprune.runs.names import COMMUNITY_MODELS

# the per-iteration and summary numbers that need the classes
LABEL_COLUMNS = ("acc", "true_categories", "wrong_assoc_pct")
LABEL_SUMMARY = ("acc_init", "acc_final", "true_categories", "wrong_assoc_pct")

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Federation:
    """The clients FedCRef runs on: each one's vectors ``xs`` (float32 (n_i, d)) and number
    of local clusters ``ks`` (K_i; ``None`` for your file with ``--local-k auto`` until the
    clients choose them, :meth:`with_ks`); ``clients``, the same clients with their classes
    (for the scores and the dirty init), or ``None`` without classes; ``ids``, your file's
    client ids in client order (``None`` for the simulated system, whose clients are
    0 .. N-1)."""

    xs: list[np.ndarray]
    ks: list[int] | None
    clients: list[ClientImages] | None
    ids: list[int] | None = None

    @classmethod
    def of_images(cls, clients: list[ClientImages]) -> Federation:
        """The simulated system's clients."""
        return cls([c.x for c in clients], [c.num_classes for c in clients], clients)

    @property
    def labels(self) -> list[np.ndarray] | None:
        return None if self.clients is None else [c.labels for c in self.clients]

    @property
    def class_counts(self) -> list[int] | None:
        """Each client's number of distinct classes (``None`` without classes)."""
        return None if self.clients is None else [len(c.classes) for c in self.clients]

    def with_ks(self, ks: list[int]) -> Federation:
        """The same clients with the K_i ``ks`` (``--local-k auto``'s choice)."""
        return dataclasses.replace(self, ks=list(ks))

    @property
    def true_categories(self) -> int | None:
        """The number of distinct classes over all clients (``None`` without classes)."""
        if self.clients is None:
            return None
        return len(set().union(*(c.classes for c in self.clients)))


@dataclasses.dataclass(frozen=True)
class LocalFits:
    """How every client fits its autoencoder before the first iteration (the initial
    clustering, ``--local-k auto``'s choice): ``system``'s settings, the run's ``seed``,
    ``epochs`` of ``model``, and with ``progress`` a bar over the clients."""

    system: SystemConfig
    seed: int
    epochs: int
    model: str | UserModel = DEFAULT_MODEL
    progress: bool = False

    def on_each_client(
        self,
        federation: Federation,
        description: str,
        fit: Callable[[int, np.ndarray, LocalTrainer], T],
    ) -> list[T]:
        """``fit(i, x_i, trainer)`` for every client in order, with one autoencoder trainer
        shared by all; with :attr:`progress`, a bar over the clients (``description``)."""
        trainer = LocalTrainer(federation.xs[0].shape[1], self.epochs, model=self.model)
        clients = tqdm(
            list(enumerate(federation.xs)),
            desc=description,
            unit="client",
            leave=False,
            disable=not self.progress,
        )
        return [fit(i, x, trainer) for i, x in clients]


def simulated_clients(
    system: SystemConfig, seed: int, data_dir: str | os.PathLike | None
) -> list[ClientImages]:
    """The simulated system's clients; an impossible ``--clients`` or ``--samples-per-class``
    is refused as soon as the class sizes are known."""
    data = load_images(system.dataset, system.split, data_dir)
    check_fits(
        np.unique(data.y, return_counts=True)[1],
        system.num_clients,
        system.samples_per_class,
        system.overlap,
        system.max_classes,
        f"{system.dataset} ({system.split})",
    )
    return partition_clients(
        data,
        system.num_clients,
        system.samples_per_class,
        system.overlap,
        seed,
        max_classes=system.max_classes,
    )


def user_federation(
    system: SystemConfig, table: ClientTable, model: str | UserModel = DEFAULT_MODEL
) -> Federation:
    """Your table's clients (module docstring), checked before anything is trained: at least
    2 clients, K_i given or countable, no more clusters than a client has vectors, classes
    for ``--init dirty``, and values in [0, 1] for the paper's autoencoder (``model``)."""
    where = dataset_label(system.dataset)
    ids = [int(c) for c in table.clients]
    if len(ids) < 2:
        raise ConfigError(f"{where} holds {len(ids)} client; FedCRef needs at least 2 clients")
    ys = table.client_y()
    if system.init == "dirty" and ys is None:
        raise ConfigError(
            f"--init dirty simulates a clustering from the classes y, which {where} does not "
            "hold; use --init kmeans-ae"
        )
    if not isinstance(model, UserModel):
        low, high = float(table.x.min()), float(table.x.max())
        if low < 0.0 or high > 1.0:
            raise DataError(
                f"{where}: x holds values in [{low:g}, {high:g}], but the default autoencoder "
                "ends in a sigmoid and reconstructs values in [0, 1] only; scale your "
                "features to [0, 1] (e.g. min-max per feature), or bring your own autoencoder"
            )
    xs = [np.asarray(x, np.float32) for x in table.client_x()]
    ks: list[int] | None
    if system.local_k == AUTO:  # chosen from the data (choose_local_ks)
        ks = None
    elif system.init != "dirty" and system.local_k is not None:
        ks = [system.local_k] * len(xs)
    elif ys is not None:
        ks = [int(np.unique(y).size) for y in ys]
    else:
        raise ConfigError(
            f"{where} holds no classes y to count each client's local clusters K_i; pass "
            "--local-k K"
        )
    for cid, x, k in zip(ids, xs, ks or ()):
        if k > len(x):
            raise ConfigError(
                f"client {cid} of {where} holds {len(x)} vectors, fewer than its K_i = {k} "
                "local clusters; pass a smaller --local-k"
            )
    clients = None
    if ys is not None:
        clients = [
            ClientImages(i, x, y, tuple(int(c) for c in np.unique(y)))
            for i, (x, y) in enumerate(zip(xs, ys))
        ]
    return Federation(xs, ks, clients, ids)


def client_names(ids: list[int] | range, where: str) -> list[str]:
    """How errors name each client: ``client <id> of <where>``."""
    return [f"client {i} of {where}" for i in ids]


def check_local_ks(system: SystemConfig, federation: Federation, where: str) -> list[str]:
    """``--local-k auto``: every client of ``federation`` (the data ``where`` names) can score
    K = 2..``system.max_local_k`` (one ConfigError line otherwise); returns how errors name
    each client."""
    ids = federation.ids if federation.ids is not None else range(len(federation.xs))
    names = client_names(ids, where)
    check_choosable([len(x) for x in federation.xs], system.max_local_k, names)
    return names


def initial_clusters(fits: LocalFits, federation: Federation) -> list[np.ndarray]:
    """Each client's initial clustering: dirty uniform (needs the classes) or k-means on the
    codes of ``fits.model`` fit for ``fits.epochs`` to the client's vectors, K_i clusters."""
    system, seed = fits.system, fits.seed
    if system.init == "dirty":
        if federation.clients is None:  # user_federation refuses this first
            raise ConfigError("--init dirty needs the clients' classes; use --init kmeans-ae")
        initial = [
            dirty_uniform(c, system.dirtiness, cluster_seed(seed, 0, c.client_id))
            for c in federation.clients
        ]
    else:
        initial = fits.on_each_client(
            federation,
            "initial clusters (autoencoder + k-means per client)",
            lambda i, x, trainer: kmeans_on_embeddings(
                x, federation.ks[i], trainer, cluster_seed(seed, 0, i)
            ),
        )
    interrupts.raise_if_received()
    return initial


def choose_local_ks(
    fits: LocalFits, federation: Federation, where: str = "the simulated system"
) -> tuple[list[LocalKChoice], list[np.ndarray]]:
    """``--local-k auto``: every client's choice of K_i
    (:func:`~fedprune.algorithms.fedcref.local_k.choose_from_data`, at most
    ``fits.system.max_local_k``) and its initial clustering, the k-means of the chosen K_i on
    the codes of ``fits.model`` fit to the client's vectors, with the client's seed of
    :func:`initial_clusters` (so equal to ``--init kmeans-ae --local-k K_i``). ``where``
    names the data in errors."""
    system, seed = fits.system, fits.seed
    if system.init == "dirty":  # the configuration refuses this first
        raise ConfigError("--local-k auto needs --init kmeans-ae")
    names = check_local_ks(system, federation, where)
    chosen = fits.on_each_client(
        federation,
        f"choosing K_i (autoencoder + k-means, K = 2..{system.max_local_k} per client)",
        lambda i, x, trainer: choose_from_data(
            x, system.max_local_k, trainer, cluster_seed(seed, 0, i), names[i]
        ),
    )
    interrupts.raise_if_received()
    return [choice for choice, _ in chosen], [labels for _, labels in chosen]


def build_system(
    system: SystemConfig,
    seed: int,
    data_dir: str | os.PathLike | None,
    epochs: int,
    model: str | UserModel = DEFAULT_MODEL,
) -> tuple[list[ClientImages], list[np.ndarray]]:
    """The simulated clients and their initial clusterings; an impossible ``--clients`` or
    ``--samples-per-class`` is refused as soon as the class sizes are known."""
    clients = simulated_clients(system, seed, data_dir)
    fits = LocalFits(system, seed, epochs, model)
    return clients, initial_clusters(fits, Federation.of_images(clients))


class FedCRefIterations(Algorithm[FedCRefState]):
    """FedCRef's iterations on the shared loop: one :meth:`FedCRef.iterate` per step, its
    row (the module text), until the stopping rule ends the run (``Step.stop``) or
    ``--max-iterations``; the run's wall time in every row's ``wall_s``."""

    unit = "it"
    round_key = "iteration"
    wall_column = "wall_s"

    def __init__(
        self,
        algorithm: FedCRef,
        labels: list[np.ndarray] | None,
        true_categories: int | None,
        desc: str,
        where: str,
    ):
        """``labels``: each client's classes (``None``: no scores); ``desc``: the progress
        bar's; ``where``: the checkpoint's path, named when it is inconsistent."""
        self.algorithm, self.labels, self.true_categories = algorithm, labels, true_categories
        self.desc, self.where = desc, where

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
    summary has no ``split`` and lists the file's ``client_ids`` in client order."""

    keeps_checkpoint = False
    takes = ("table", "model")

    @classmethod
    def settle(
        cls, config: FedCRefRunConfig, out: Path, given: Mapping
    ) -> tuple[FedCRefRunConfig, dict]:
        """Your file's SHA-256 (where the file exists: a table handed in may name a path
        only); a table handed in needs ``config.dataset`` to name a ``.npz``."""
        table = given.get("table")
        if table is not None and not is_user_file(config.dataset):
            raise ConfigError(
                f"a table was given but --dataset is {config.dataset!r}; give the path of the "
                ".npz it is recorded as"
            )
        if table is None or Path(config.dataset).is_file():
            return settled_file(config, out)
        return config, config.recorded()

    def __init__(self, config: FedCRefRunConfig, inputs: Inputs):
        super().__init__(config, inputs)
        system, params = self.system, self.params = config.system(), config.algorithm()
        self.trained = trained = inputs.model_of(config)
        self.mine = mine = is_user_file(system.dataset)
        # the system is built (and its parameters checked) before config.json is written, so
        # an impossible setting leaves no run directory that would refuse the corrected command
        if mine:
            table = inputs.get("table")
            table = read_table_npz(system.dataset) if table is None else table
            federation = user_federation(system, table, trained)
        else:
            federation = Federation.of_images(
                simulated_clients(system, params.seed, inputs.data_dir)
            )
        where = dataset_label(system.dataset) if mine else "the simulated system"
        self.auto = auto = system.local_k == AUTO
        if auto:  # every client can score K = 2..max_local_k, before anything is trained
            check_local_ks(system, federation, where)
        self.input_dim = int(federation.xs[0].shape[1])
        if isinstance(trained, UserModel):  # yours is checked once, before anything is trained
            self.architecture = AutoencoderSpec(self.input_dim, params.seed, model=trained).keras()
        fits = LocalFits(system, params.seed, params.local_epochs, trained, inputs.progress)
        self.choices = chosen = None
        if inputs.existing is not None and auto:  # resumed: the recorded choice
            chosen = read_local_k(inputs.existing.path, len(federation.xs), system.max_local_k)
        if auto and chosen is None:
            self.choices, self.initial = choose_local_ks(fits, federation, where)
            chosen = [c.chosen for c in self.choices]
        self.federation = federation if chosen is None else federation.with_ks(chosen)
        if self.choices is None:
            self.initial = initial_clusters(fits, self.federation)
        validate_inputs(federation.xs, self.federation.ks, self.initial)

    def start(self, run: RunDir) -> tuple[FedCRefIterations, int]:
        federation, system, params = self.federation, self.system, self.params
        if self.choices is not None:
            record = local_k_record(self.choices, federation.class_counts, federation.ids)
            write_local_k(run.path, record)
        xs, ks = federation.xs, federation.ks
        algorithm = FedCRef(
            xs, ks, self.initial, params, model=self.trained, bars=self.inputs.progress
        )
        if self.mine:
            desc = f"fedcref {dataset_label(system.dataset)} {system.init}"
        else:
            desc = f"fedcref {system.dataset} d={system.dirtiness}"
        where = str(run.path / CHECKPOINT)
        iterations = FedCRefIterations(
            algorithm, federation.labels, federation.true_categories, desc, where
        )
        return iterations, params.max_iterations

    def summary(self, run: RunDir, result: RoundsResult[FedCRefState]) -> dict:
        config, system, federation, mine = self.config, self.system, self.federation, self.mine
        labels, ks, final = federation.labels, federation.ks, result.state
        artefacts.write_community_models(run.path, final.community_models)
        artefacts.write_assignments(run.path, final.assignments)
        rows = run.metrics_rows()
        last = rows[-1]
        summary = {
            **self.summary_head(
                {
                    "split": system.split,
                    "init": system.init,
                    "dirtiness": system.dirtiness if system.init == "dirty" else None,
                }
            ),
            "num_clients": len(federation.xs) if mine else system.num_clients,
            "mean_k": float(np.mean(ks)),
            "acc_init": None if labels is None else round(mean_client_acc(labels, self.initial), 6),
            "acc_final": None if labels is None else float(last["acc"]),
            "communities": int(last["communities"]),
            "true_categories": federation.true_categories,
            "wrong_assoc_pct": None if labels is None else float(last["wrong_assoc_pct"]),
            "clusters_total": int(rows[0]["clusters"]),
            "isolated_start": int(rows[0]["isolated"]),
            "isolated_end": int(last["isolated"]),
            "iterations": int(last["iteration"]),
            "stop_reason": final.stop_reason,
            "wall_s": float(last["wall_s"]),
            "deploy": DeployManifest(
                kind="community",
                models=COMMUNITY_MODELS,
                model=config.model,
                input_shape=(self.input_dim,),
                labels=None,
                normalization="none (your vectors as given)" if mine else "pixels scaled to [0, 1]",
                data=table_recipe(config) if mine else image_clients_recipe(config.recorded()),
            ).to_json(),
        }
        if self.auto:
            summary["local_k_chosen"] = list(ks)
            if federation.class_counts is not None:
                agreement = comparison(ks, federation.class_counts)
                summary["local_k_mean_abs_diff"] = agreement["mean_abs_diff"]
                summary["local_k_exact_fraction"] = agreement["exact_fraction"]
        if labels is None:
            summary = {k: v for k, v in summary.items() if k not in LABEL_SUMMARY}
        if mine:
            del summary["split"]
            summary["client_ids"] = federation.ids
        interrupts.raise_if_received()  # an interrupt during the last iteration: no summary
        return summary


run_fedcref_experiment = FedCRefRun.run
"""Run (or resume, or return the finished) FedCRef experiment of ``config`` in ``out``;
returns the summary (:class:`FedCRefRun` says what it takes and writes)."""


def table_recipe(config: FedCRefRunConfig) -> dict:
    """The deploy manifest's recipe of your table: the file and its SHA-256 (when known)."""
    recipe = {"loader": "table", "dataset": config.dataset}
    if config.dataset_sha256 is not None:
        recipe["sha256"] = config.dataset_sha256
    return recipe


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
