"""The one run composer: the life of every run of every method family, written once.

A method family (FedAvg, the clustered masked pipeline, ClusterFL, the clustered image
methods, FedCRef, the one-shot table clusterers, the fine-tuning of a finished run) hands in
one :class:`RunPlan` class, registered against its configuration class in :data:`FAMILIES`
(the table :mod:`fedprune.configs.strategies` keeps by configuration class, as the mask
policies and clusterers are). :func:`compose_run` then runs it through these steps, in this
order, each for the reason given:

1. **settle** (:meth:`RunPlan.settle`): the configuration as the run directory ``out``
   records it (the HAR protocol taken from an existing ``config.json``, your data file's
   SHA-256). First, because whether ``out`` holds *this* run is a comparison with that
   record.
2. **finished?**: a run directory whose ``config.json`` equals the record and that holds
   ``summary.json`` is returned as it is, before any data is loaded or model built; one whose
   ``config.json`` differs is refused here, before any work
   (:meth:`~fedprune.runs.RunDir.existing`). This is the only place a runner asks; the
   command line and :class:`fedprune.api.Trainer` ask before it only to answer without
   starting TensorFlow or workers.
3. **prepare** (the plan's constructor): the family loads its data and checks every count
   against it (clusters, clients per round), resolves the model (:meth:`Inputs.model_of`)
   and builds it once, so that your model's mistakes are found; nothing is written. A
   refused start thus leaves no directory that would refuse the corrected command (what the
   caller made is undone by :func:`fedprune.runs.removed_unless_started`).
4. **open**: only now is the :class:`~fedprune.runs.RunDir` made (``config.json``), and your
   model's architecture written beside it (``model.json``): resuming, fine-tuning and export
   rebuild your model from that file, so it exists from the first checkpoint on.
5. **start** (:meth:`RunPlan.start`): the family builds what its rounds need (TFF
   processes, held-out evaluation) and returns its :class:`~fedprune.engine.loop.Algorithm`
   and the number of rounds, or ``None`` where it has no rounds (one-shot clustering,
   fine-tuning); it may write files that a resumed run reads back (FedCRef's ``local_k.json``).
6. **rounds**: :func:`~fedprune.engine.loop.run_algorithm` restores the checkpoint (checked
   against the state's schema), runs the remaining rounds with their metrics rows, TensorBoard
   events and progress bar, and checkpoints after every round, so that an interrupt (Ctrl-C,
   a crash) loses at most the round in progress and the same call resumes.
7. **finish** (:meth:`RunPlan.summary`): the family writes its artefacts (clusters, masks,
   models, personal models: :func:`write_clustering` for the clustered ones) and returns the
   summary, which starts from what every run records (:meth:`RunPlan.summary_head`); the
   composer writes ``summary.json``
   **last**, since its presence is what makes a run finished (step 2): an interrupt before it
   leaves a run that resumes. A family whose final state is all in its artefacts
   (``keeps_checkpoint = False``) has its checkpoint removed after the summary.

A family registers by naming its configuration class (``class FedAvgRun(RunPlan[FedAvgConfig],
family=FedAvgConfig)``), lists what a caller may hand in (:attr:`RunPlan.takes`) and the
counts that may not exceed the clients (:attr:`RunPlan.at_most_clients`, checked by
:meth:`RunPlan.check_counts`); its runner is :meth:`RunPlan.run`.

What the run directory's lock, the placing of your data and the TFF workers are (one process
per ``out``, :mod:`fedprune.runs.lock`) is the caller's: :class:`fedprune.api.Trainer` and
``fedprune finetune`` hold them around :func:`compose_run`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from fedprune.checks import check_at_most
from fedprune.configs.har import AUTO
from fedprune.configs.protocol import settle, settled_sha256
from fedprune.configs.strategies import ByConfig
from fedprune.engine.loop import Algorithm, RoundsResult, run_algorithm
from fedprune.models.spec import ModelSpec
from fedprune.models.user import UserModel, resolve, write_architecture
from fedprune.runs import RunDir, artefacts, recorded_config
from fedprune.runs.run_dir import recorded_own_files

C = TypeVar("C")


@dataclasses.dataclass(frozen=True)
class Inputs:
    """What a run starts from besides its configuration: the run directory ``out``, where the
    built-in datasets are (``data_dir``), whether to show progress bars, the run already in
    ``out`` (``existing``, unfinished; ``None`` for a new run) and what the caller handed in
    (``given``: your model as ``model``, and a family's own, e.g. a loaded table)."""

    out: Path
    data_dir: str | os.PathLike | None
    progress: bool
    existing: RunDir | None
    given: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def get(self, name: str, default: Any = None) -> Any:  # noqa: ANN401 (the caller's object)
        """What the caller handed in as ``name`` (``default`` where nothing or ``None``)."""
        value = self.given.get(name)
        return default if value is None else value

    def model_of(self, config: Any) -> str | UserModel:  # noqa: ANN401 (a configuration)
        """The model ``config.model`` names: your :class:`UserModel` handed in as ``model``,
        a table model's name, or yours rebuilt from the run's ``model.json``
        (:func:`fedprune.models.user.resolve`)."""
        return resolve(config.model, self.given.get("model"), self.out)


class RunPlan(Generic[C]):
    """One method family's part of a run (the module text). The constructor is step 3
    (prepare: every check, nothing written); subclasses set ``architecture`` to your Keras
    model where the run trains one (written as ``model.json`` in step 4) and give
    :meth:`start` and :meth:`summary`. ``class P(RunPlan[Config], family=Config)`` registers
    ``P`` for ``Config`` in :data:`FAMILIES`."""

    keeps_checkpoint: ClassVar[bool] = True
    takes: ClassVar[tuple[str, ...]] = ()
    """What a caller may hand in (:meth:`run`'s keywords), e.g. ``("model",)``."""
    at_most_clients: ClassVar[tuple[str, ...]] = ()
    """The configuration's counts that may not exceed the data's clients
    (:meth:`check_counts`), e.g. ``("clusters", "clients_per_round")``."""
    records_file: ClassVar[bool] = False
    """Whether the record is :func:`settled_file`'s (your data file's SHA-256) rather than the
    HAR protocol's (the default :meth:`settle`)."""
    architecture: Any = None  # your model, built and checked in prepare

    def __init_subclass__(cls, family: type | None = None, **kwargs: Any) -> None:  # noqa: ANN401
        super().__init_subclass__(**kwargs)
        if family is not None:
            FAMILIES.register(family, cls)

    def __init__(self, config: C, inputs: Inputs):
        self.config = config
        self.inputs = inputs

    @classmethod
    def run(
        cls,
        config: C,
        out: str | os.PathLike,
        data_dir: str | os.PathLike | None = None,
        progress: bool = True,
        **given: Any,  # noqa: ANN401 (what the family takes: :attr:`takes`)
    ) -> dict:
        """Train (or resume, or return the finished) run of ``config`` in ``out``; returns the
        summary (:func:`compose_run`). ``given``: what the family takes (:attr:`takes`, e.g.
        your ``model``); anything else is a ``TypeError``, as for a function's keywords."""
        unknown = sorted(set(given) - set(cls.takes))
        if unknown:
            raise TypeError(f"{cls.__name__}.run() got unexpected keyword argument(s) {unknown}")
        return compose_run(cls, config, out, data_dir, progress, **given)

    @classmethod
    def settle(cls, config: C, out: Path, given: Mapping[str, Any]) -> tuple[C, dict]:
        """``config`` settled for the run directory ``out`` and the dict its ``config.json``
        holds (``given``: what the caller handed in). Default: :func:`settled_file` where
        :attr:`records_file`, else the HAR protocol (:func:`fedprune.configs.protocol.settle`,
        with the configuration's options added later)."""
        if cls.records_file:
            return settled_file(config, out)
        return settle(config, out, config.ADDED_LATER)

    def check_counts(self, num_clients: int, where: str) -> None:
        """Each count :attr:`at_most_clients` names (``--clusters auto`` aside) at most
        ``num_clients``, the clients of ``where`` (a dataset's label): one ConfigError line."""
        for name in self.at_most_clients:
            value = getattr(self.config, name)
            if value != AUTO:
                check_at_most(name, value, num_clients, f"{where}'s clients")

    def start(self, run: RunDir) -> tuple[Algorithm, int] | None:
        """The algorithm and its number of rounds in ``run`` (``None``: no rounds)."""
        return None

    def summary(self, run: RunDir, result: RoundsResult | None) -> dict:
        """The artefacts written to ``run`` and the summary returned (``result``: the
        rounds', ``None`` without rounds)."""
        raise NotImplementedError

    def summary_head(self, data: Mapping[str, Any] | None = None) -> dict:
        """What every run's summary starts with: the configuration's ``method`` and
        ``dataset``, the entries that describe the data further (``data``: a partition, a
        split), and the ``seed``."""
        config = self.config
        return {
            "method": config.method,
            "dataset": config.dataset,
            **(data or {}),
            "seed": config.seed,
        }


def write_clustering(
    run: RunDir,
    cluster_of: Mapping[int, int],
    models: Mapping[int, Any] | None = None,  # noqa: ANN401 (each cluster's weights)
    choice: Mapping | None = None,
) -> None:
    """A clustered run's artefacts in ``run``: each client's cluster (``clusters.json``), each
    cluster's model where given (``cluster_models.npz``) and how K was chosen where it was
    (``cluster_choice.json``, the choice's record)."""
    artefacts.write_clusters(run.path, cluster_of)
    if models is not None:
        artefacts.write_cluster_models(run.path, models)
    if choice is not None:
        artefacts.write_cluster_choice(run.path, choice)


def settled_file(config: C, out: Path) -> tuple[C, dict]:
    """``config`` with the SHA-256 of your data file settled for the run directory ``out``
    (:func:`fedprune.configs.protocol.settled_sha256`: a run there made from other bytes is
    refused) and its record, ``config.recorded()``: the :meth:`RunPlan.settle` of the
    families whose record does not depend on the directory otherwise."""
    previous = recorded_config(out)
    sha = settled_sha256(config, previous)
    config = dataclasses.replace(config, dataset_sha256=sha)
    record = config.recorded()
    if previous is not None and _record_with_unused_fields(out, previous, record, config):
        record = dict(previous)  # written before the fields your data has no use for were left out
    return config, record


def _record_with_unused_fields(
    out: Path,
    previous: Mapping,
    record: Mapping,
    config: Any,  # noqa: ANN401 (a configuration)
) -> bool:
    """Whether ``previous`` (the ``config.json`` in ``out``) is ``record`` plus fields
    ``config`` does not use (a run of your data recorded before such fields were left out of
    its record, ``alpha`` of a partition it never made): the same run, resumed as recorded."""
    previous = recorded_own_files(out, previous)
    record = json.loads(json.dumps(recorded_own_files(out, record)))  # tuples as lists
    extra = set(previous) - set(record)
    same = {k: previous.get(k) for k in record} == record
    return bool(extra) and same and extra <= set(config.unused_fields())


def har_model(
    config: Any,  # noqa: ANN401 (a HAR configuration)
    data: Any,  # noqa: ANN401 (its FederatedData)
    inputs: Inputs,
) -> tuple[ModelSpec, Any, Any]:
    """The classifier of a HAR run on ``data`` (a
    :class:`~fedprune.data.partition.FederatedData`): its spec (``config.model``, or yours:
    :meth:`Inputs.model_of`; seeded by ``config.seed``), its Keras model, built once here so
    that your model is checked before anything is written, and that model again where it is
    yours (the plan's ``architecture``), else ``None``."""
    spec = ModelSpec(data.input_shape, data.num_classes, config.seed, inputs.model_of(config))
    keras = spec.keras()
    return spec, keras, keras if isinstance(spec.model, UserModel) else None


FAMILIES: ByConfig[type[RunPlan]] = ByConfig("run family")
"""Each family's :class:`RunPlan` by configuration class (registered by its module)."""


def compose_run(
    plan: type[RunPlan],
    config: Any,  # noqa: ANN401 (the family's configuration)
    out: str | os.PathLike,
    data_dir: str | os.PathLike | None = None,
    progress: bool = True,
    **given: Any,  # noqa: ANN401 (your model, a family's own inputs)
) -> dict:
    """Train (or resume, or return the finished) run of ``config`` in ``out`` with the family
    ``plan``; returns the summary (the module text gives the steps)."""
    out = Path(out)
    config, record = plan.settle(config, out, given)
    run = RunDir.existing(out, record)
    if run is not None and run.finished:
        return run.read_summary()
    prepared = plan(config, Inputs(out, data_dir, progress, run, given))
    run = run or RunDir(out, record)  # only now: a refused configuration leaves no directory
    if prepared.architecture is not None:
        write_architecture(prepared.architecture, run.path)
    rounds = prepared.start(run)
    result = None if rounds is None else run_algorithm(run, *rounds, progress=progress)
    summary = prepared.summary(run, result)
    run.write_summary(summary)
    if not prepared.keeps_checkpoint:
        run.remove_checkpoint()  # the finished state is in the artefacts
    return summary


def run_config(
    config: Any,  # noqa: ANN401 (a registered configuration)
    out: str | os.PathLike,
    data_dir: str | os.PathLike | None = None,
    progress: bool = True,
    **given: Any,  # noqa: ANN401
) -> dict:
    """:func:`compose_run` with the family registered for ``config``'s class
    (:data:`FAMILIES`; its module must have been imported, as the method's runner is)."""
    return compose_run(FAMILIES.of(config), config, out, data_dir, progress, **given)
