"""The run composer's lifecycle on a toy family (no TensorFlow): a finished run is returned
before anything is prepared, a refused start leaves no run directory, the checkpoint is
checked against the state's schema, the summary is written last, and a family whose final
state is in its artefacts loses its checkpoint at the end; what every family shares: its
registration, its runner's keywords, the counts checked against the clients, the summary's
first entries and a clustered run's artefacts."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from fedprune.engine.compose import (
    FAMILIES,
    Inputs,
    RunPlan,
    compose_run,
    run_config,
    write_clustering,
)
from fedprune.engine.loop import Algorithm, Schema, Step, UnfitCheckpoint
from fedprune.errors import ConfigError, DataError
from fedprune.runs import RunDir, artefacts, names


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    rounds: int = 3
    clusters: int = 2
    refuse: bool = False


@dataclasses.dataclass
class ToyState:
    total: np.ndarray
    labels: np.ndarray

    def to_checkpoint(self):
        return {"total": [self.total], "labels": [self.labels]}, {}


class ToyRounds(Algorithm[ToyState]):
    def __init__(self, clusters: int, calls: list):
        self.clusters, self.calls = clusters, calls

    def describe(self, t):
        return "toy"

    def initial(self):
        return ToyState(np.zeros(2), np.zeros(4, np.int64))

    def schema(self, arrays):
        return Schema({"total": [(2,)], "labels": [(4,)]}, {"labels": self.clusters})

    def restore(self, rounds_done, arrays, scalars):
        if float(arrays["total"][0][0]) < 0:
            raise UnfitCheckpoint("does not fit this run (a negative total)")
        return ToyState(arrays["total"][0], arrays["labels"][0])

    def step(self, t, state):
        self.calls.append(t)
        return Step(ToyState(state.total + t, state.labels), [{"round": t, "total": t}])


class ToyRun(RunPlan[ToyConfig]):
    events: list = []  # what the composer asked, in order (reset by each test)

    @classmethod
    def settle(cls, config, out, given):
        cls.events.append("settle")
        return config, dataclasses.asdict(config)

    def __init__(self, config, inputs: Inputs):
        super().__init__(config, inputs)
        self.events.append("prepare")
        assert not (inputs.out / "config.json").exists() or inputs.existing is not None
        if config.refuse:
            raise ConfigError("refused before anything is written")
        self.calls = inputs.get("calls", [])

    def start(self, run):
        self.events.append("start")
        return ToyRounds(self.config.clusters, self.calls), self.config.rounds

    def summary(self, run, result):
        self.events.append("summary")
        assert not run.finished  # the summary file comes after the artefacts
        return {"rounds": result.rounds, "total": float(result.state.total[0])}


class OneShotRun(ToyRun):
    keeps_checkpoint = False

    def start(self, run):
        return None

    def summary(self, run, result):
        assert result is None
        (run.path / "checkpoint.npz").write_bytes(b"")  # as if a previous attempt left one
        return {"one_shot": True}


@pytest.fixture(autouse=True)
def _fresh_events():
    ToyRun.events = []


def test_a_run_goes_through_the_steps_in_order_and_ends_with_its_summary(tmp_path):
    calls = []
    summary = compose_run(ToyRun, ToyConfig(), tmp_path / "run", calls=calls)
    assert summary == {"rounds": 3, "total": 6.0} and calls == [1, 2, 3]
    assert ToyRun.events == ["settle", "prepare", "start", "summary"]
    assert json.loads((tmp_path / "run" / "summary.json").read_text()) == summary
    assert (tmp_path / "run" / "checkpoint.npz").exists()  # kept: a family may read it


def test_a_finished_run_is_returned_before_anything_is_prepared(tmp_path):
    first = compose_run(ToyRun, ToyConfig(), tmp_path)
    ToyRun.events = []
    assert compose_run(ToyRun, ToyConfig(), tmp_path) == first
    assert ToyRun.events == ["settle"]


def test_another_configuration_in_the_folder_is_refused_before_anything_is_prepared(tmp_path):
    compose_run(ToyRun, ToyConfig(), tmp_path)
    ToyRun.events = []
    with pytest.raises(ConfigError, match="differs in: rounds"):
        compose_run(ToyRun, ToyConfig(rounds=4), tmp_path)
    assert ToyRun.events == ["settle"]


def test_a_refused_start_leaves_no_run_directory(tmp_path):
    with pytest.raises(ConfigError, match="refused"):
        compose_run(ToyRun, ToyConfig(refuse=True), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_an_interrupted_run_resumes_after_its_last_checkpoint(tmp_path):
    def crash(t, state):
        if t == 2:
            raise KeyboardInterrupt
        return Step(ToyState(state.total + t, state.labels), [{"round": t, "total": t}])

    original = ToyRounds.step
    ToyRounds.step = lambda self, t, state: crash(t, state)
    try:
        with pytest.raises(KeyboardInterrupt):
            compose_run(ToyRun, ToyConfig(), tmp_path)
    finally:
        ToyRounds.step = original
    assert not (tmp_path / "summary.json").exists()
    calls = []
    summary = compose_run(ToyRun, ToyConfig(), tmp_path, calls=calls)
    assert calls == [2, 3] and summary == {"rounds": 3, "total": 6.0}


def test_the_checkpoint_is_checked_against_the_state_schema(tmp_path):
    config = ToyConfig(rounds=1)
    run = RunDir(tmp_path, dataclasses.asdict(config))
    run.save_checkpoint(1, {"total": [np.zeros(3)], "labels": [np.zeros(4, np.int64)]})
    with pytest.raises(DataError, match=r"'total' array 0 has shape \(3,\), this run's is \(2,\)"):
        compose_run(ToyRun, config, tmp_path)
    run.save_checkpoint(1, {"total": [np.zeros(2)], "labels": [np.array([0, 1, 2, 0])]})
    with pytest.raises(DataError, match=r"'labels' names cluster 2; this run has clusters 0 to 1"):
        compose_run(ToyRun, config, tmp_path)
    run.save_checkpoint(1, {"total": [-np.ones(2)], "labels": [np.zeros(4, np.int64)]})
    with pytest.raises(DataError, match=r"does not fit this run \(a negative total\); move it"):
        compose_run(ToyRun, config, tmp_path)
    run.save_checkpoint(1, {"labels": [np.zeros(4, np.int64)]})
    with pytest.raises(DataError, match=r"is damaged \(it lacks 'total'\)"):
        compose_run(ToyRun, config, tmp_path)
    assert not (tmp_path / "summary.json").exists()


def test_a_family_without_rounds_and_without_a_checkpoint_to_keep(tmp_path):
    assert compose_run(OneShotRun, ToyConfig(), tmp_path) == {"one_shot": True}
    assert (tmp_path / "summary.json").exists()
    assert not (tmp_path / "checkpoint.npz").exists()


def test_the_family_of_a_configuration_is_the_one_registered_for_its_class(tmp_path):
    @dataclasses.dataclass(frozen=True)
    class Other(ToyConfig):
        pass

    with pytest.raises(LookupError, match="no run family is registered for Other"):
        run_config(Other(), tmp_path)
    FAMILIES.register(Other, ToyRun)
    try:
        assert run_config(Other(), tmp_path) == {"rounds": 3, "total": 6.0}
    finally:
        FAMILIES._table.pop(Other)


@dataclasses.dataclass(frozen=True)
class CountedConfig:
    """A configuration with the fields every family's summary starts with and two counts."""

    method: str = "counted"
    dataset: str = "toy"
    seed: int = 7
    clusters: int | str = 2
    clients_per_round: int = 3


@dataclasses.dataclass(frozen=True)
class RegisteredConfig(ToyConfig):
    pass


class RegisteredRun(ToyRun, family=RegisteredConfig):
    """Registered by naming its configuration class; takes ``calls`` from its caller."""

    takes = ("calls",)


class CountedRun(RunPlan[CountedConfig]):
    at_most_clients = ("clusters", "clients_per_round")


def test_a_family_registers_by_naming_its_configuration_class(tmp_path):
    try:
        assert FAMILIES.of(RegisteredConfig()) is RegisteredRun
        assert run_config(RegisteredConfig(), tmp_path) == {"rounds": 3, "total": 6.0}
    finally:
        FAMILIES._table.pop(RegisteredConfig)


def test_a_familys_runner_takes_what_the_family_takes_and_refuses_the_rest(tmp_path):
    calls = []
    summary = RegisteredRun.run(ToyConfig(rounds=2), tmp_path / "a", progress=False, calls=calls)
    assert summary == {"rounds": 2, "total": 3.0} and calls == [1, 2]
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['model'\]"):
        RegisteredRun.run(ToyConfig(), tmp_path / "b", model=object())
    assert not (tmp_path / "b").exists()  # refused before anything was settled or made


def test_the_counts_a_family_names_are_checked_against_the_clients(tmp_path):
    inputs = Inputs(tmp_path, None, False, None)
    CountedRun(CountedConfig(), inputs).check_counts(3, "toy")  # both at most 3
    CountedRun(CountedConfig(clusters="auto"), inputs).check_counts(3, "toy")  # chosen later
    with pytest.raises(ConfigError, match=r"--clusters must be at most 3 \(the toy data's"):
        CountedRun(CountedConfig(clusters=4), inputs).check_counts(3, "the toy data")
    with pytest.raises(ConfigError, match="--clients-per-round must be at most 4"):
        CountedRun(CountedConfig(clients_per_round=5), inputs).check_counts(4, "toy")


def test_every_summary_starts_with_the_method_the_dataset_and_the_seed(tmp_path):
    plan = CountedRun(CountedConfig(), Inputs(tmp_path, None, False, None))
    assert plan.summary_head() == {"method": "counted", "dataset": "toy", "seed": 7}
    head = plan.summary_head({"partition": "paper", "split": "train"})
    assert list(head) == ["method", "dataset", "partition", "split", "seed"]  # the data's
    assert head["partition"] == "paper" and head["seed"] == 7


def test_a_clustered_runs_artefacts_are_written_as_given(tmp_path):
    run = RunDir(tmp_path / "run", {"method": "toy"})
    write_clustering(run, {5: 1, 9: 0})
    assert artefacts.read_clusters(run.path) == {5: 1, 9: 0}
    assert not (run.path / names.CLUSTER_MODELS).exists()
    assert not (run.path / names.CLUSTER_CHOICE).exists()
    models = {0: [np.zeros((2, 2), np.float32)], 1: [np.ones((2, 2), np.float32)]}
    write_clustering(run, {5: 1, 9: 0}, models, {"chosen": 2})
    read = artefacts.read_cluster_models(run.path)
    assert sorted(read) == [0, 1] and np.array_equal(read[1][0], models[1][0])
    assert json.loads((run.path / names.CLUSTER_CHOICE).read_text()) == {"chosen": 2}
