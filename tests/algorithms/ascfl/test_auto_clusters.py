"""``--clusters auto`` for CFL with a fixed K and IFCA
(:mod:`fedprune.algorithms.ascfl.auto_clusters`): the choice on separable signals, how it
starts each rule, the files a run records, resume keeps the choice, and bad input as one
line before any directory is made."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from fedprune.algorithms.ascfl import auto_clusters, experiment, metrics, rules
from fedprune.algorithms.ascfl.compose import ClusterState, checkpoint_shapes
from fedprune.algorithms.ascfl.experiment import run_clustered_images
from fedprune.algorithms.caafp.choose_k import ClusterChoice
from fedprune.cli import main
from fedprune.configs.ascfl import CFLConfig, CFLFixedConfig, ClusteredImageConfig, IFCAConfig
from fedprune.data.user_images import from_images, write_images_npz
from fedprune.errors import ConfigError, DataError
from fedprune.models.spec import ModelSpec
from fedprune.runs import RunDir
from tests.algorithms.test_fedcref_run import pattern_images
from tests.conftest import interrupted

GROUPS = np.repeat(np.arange(3), 2)  # 6 clients, two per group


def separable(groups: np.ndarray, seed: int = 0, noise: float = 0.05) -> np.ndarray:
    """One signal per client: its group's direction plus a little noise."""
    rng = np.random.default_rng(seed)
    directions = rng.normal(size=(groups.max() + 1, 50))
    return directions[groups] + noise * rng.normal(size=(len(groups), 50))


# --- the choice, on arrays ------------------------------------------------------------------


@pytest.mark.parametrize("k", [2, 3, 4])
def test_the_choice_finds_the_groups_of_separable_signals(k):
    groups = np.repeat(np.arange(k), 3)
    start = auto_clusters.choose_start(separable(groups), max_clusters=len(groups) - 1)
    assert start.k == k
    assert metrics.adjusted_rand_index(start.cluster_of, groups) == pytest.approx(1.0)
    assert set(start.choice.silhouettes) == set(range(2, len(groups)))
    assert start.choice.best == k


def test_signals_without_groups_keep_one_cluster():
    rng = np.random.default_rng(0)
    start = auto_clusters.choose_start(rng.normal(size=(12, 400)), max_clusters=8)
    assert start.k == 1 and start.cluster_of.tolist() == [0] * 12
    assert max(start.choice.silhouettes.values()) < start.choice.min_silhouette


def test_the_record_has_the_pipelines_keys():
    choice = ClusterChoice({2: 0.5, 3: 0.75}, 0.2, 3)
    assert choice.file_record("update", 3) == {
        "signal": "update",
        "distance": "cosine",
        "linkage": "average",
        "max_clusters": 3,
        "chosen": 3,
        "min_silhouette": 0.2,
        "silhouette": {"2": 0.5, "3": 0.75},
    }
    assert auto_clusters.tried(8, 20) == 7 and auto_clusters.tried(8, 6) == 4


def test_the_choice_travels_in_the_checkpoint():
    choice = ClusterChoice({2: 0.31, 3: 0.62, 4: 0.40}, 0.2, 3)
    state = ClusterState([[np.ones(2, np.float32)]] * 3, np.array([0, 1, 2, 1]), choice=choice)
    arrays, scalars = state.to_checkpoint()
    back = ClusterState.from_checkpoint(arrays, scalars)
    assert back.choice == choice
    assert [a.shape for a in arrays["cluster_choice"]] == [(3,), (3,), (2,)]
    # a run with a fixed K writes no choice (its checkpoints are as before)
    plain, _ = ClusterState(state.models, state.cluster_of).to_checkpoint()
    assert "cluster_choice" not in plain
    assert ClusterState.from_checkpoint(plain, scalars).choice is None


# --- how the choice starts each rule --------------------------------------------------------


@pytest.fixture(scope="module")
def spec():
    return ModelSpec((28, 28, 1), 6, seed=0, model="image_cnn_small")


def test_ifca_starts_from_k_copies_and_the_cut_in_round_1(spec):
    config = IFCAConfig(num_clients=6, clusters="auto", max_clusters=5)
    rule = rules.rule_of(config, spec, chosen=3)
    assert isinstance(rule, rules.IFCARule) and rule.from_cut and rule.slots == 3
    w0 = spec.initial_weights().trainable
    models = rule.initial_models()
    assert len(models) == 3
    for model in models:
        for a, b in zip(model, w0):
            np.testing.assert_array_equal(a, b)
    cut = np.array([0, 0, 1, 1, 2, 2])
    state = ClusterState(models, cut)
    ids = np.arange(6)

    def no_losses(_ids):
        raise AssertionError("round 1 takes the cut, not the losses")

    first = rule.choose(1, state, ids, no_losses)
    assert first.cluster_of.tolist() == cut.tolist() and len(first.received_every_model) == 0
    # from round 2 on, IFCA's rule: the model of lowest loss
    losses = np.tile([3.0, 1.0, 2.0], (6, 1))
    later = rule.choose(2, state, ids, lambda chosen: losses[chosen])
    assert later.cluster_of.tolist() == [1] * 6 and len(later.received_every_model) == 6
    # K = 1 chosen: FedAvg's rule, as --clusters 1
    assert isinstance(rules.rule_of(config, spec, chosen=1), rules.FedAvgRule)
    # a fixed K keeps its seeded models
    fixed = rules.rule_of(IFCAConfig(num_clients=6, clusters=3), spec)
    assert not fixed.from_cut
    assert not np.array_equal(fixed.initial_models()[0][0], fixed.initial_models()[1][0])


def test_cfl_fixed_takes_the_chosen_k(spec):
    config = CFLFixedConfig(num_clients=6, clusters="auto", max_clusters=5)
    rule = rules.rule_of(config, spec, chosen=2)
    assert isinstance(rule, rules.CFLFixedRule) and rule.from_cut
    assert rule.config.clusters == 2 and len(rule.initial_models()) == 2
    assert len(rules.rule_of(CFLFixedConfig(num_clients=6, clusters=2), spec).initial_models()) == 1
    with pytest.raises(ValueError):
        rules.rule_of(config, spec)  # auto needs the chosen K


def test_checkpoint_shapes_include_the_choice(spec):
    shapes = checkpoint_shapes({}, spec, 6, 3, tried=4)
    assert shapes["cluster_choice"] == [(4,), (4,), (2,)]


# --- configuration: recorded, and bad input ------------------------------------------------


def test_config_records_auto_and_fixed_k_runs_record_as_before():
    auto = IFCAConfig(clusters="auto").recorded()
    assert auto["clusters"] == "auto" and auto["max_clusters"] == 8
    for config in (IFCAConfig(), CFLFixedConfig(), CFLConfig(), ClusteredImageConfig()):
        assert "max_clusters" not in config.recorded()  # run directories from before resume
    assert "max_clusters" not in IFCAConfig(clusters="auto").unused_fields()
    assert "max_clusters" not in CFLFixedConfig(clusters="auto").unused_fields()
    assert "max_clusters" in CFLFixedConfig(clusters=4).unused_fields()


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: IFCAConfig(num_clients=2, clusters="auto"), "needs at least 3 clients"),
        (lambda: CFLFixedConfig(num_clients=2, clusters="auto"), "give --clusters 1 or 2"),
        (
            lambda: IFCAConfig(num_clients=6, clusters="auto"),
            r"--max-clusters must be at most 5 \(--clients 6 - 1",
        ),
        (
            lambda: CFLFixedConfig(
                num_clients=20, clusters="auto", max_clusters=19, client_dropout=0.1
            ),
            "--max-clusters must be at most 18 .the clients reporting",
        ),
        (lambda: IFCAConfig(clusters="auto", max_clusters=1), "--max-clusters must be"),
        (lambda: IFCAConfig(clusters="three"), "--clusters must be an integer K >= 1 or auto"),
        (lambda: ClusteredImageConfig(clusters="auto"), "ascfl adapts its number of clusters"),
        (lambda: CFLConfig(clusters="auto"), "cfl adapts its number of clusters"),
    ],
)
def test_bad_auto_options_are_one_line(make, message):
    with pytest.raises(ConfigError, match=message) as caught:
        make()
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["ifca", "--clusters", "auto", "--clients", "2"], "needs at least 3 clients"),
        (["cfl-fixed", "--clusters", "auto", "--clients", "6"], "--max-clusters must be at most"),
        (["ascfl", "--clusters", "auto"], "ascfl adapts its number of clusters itself"),
        (["cfl", "--clusters", "auto"], "cfl adapts its number of clusters itself"),
        (["ifca", "--clusters", "4", "--max-clusters", "5"], "--max-clusters: not used"),
    ],
)
def test_the_command_line_refuses_before_making_anything(args, fragment, tmp_path, capsys):
    out = tmp_path / "run"
    try:
        rc = main(["train", *args, "--out", str(out), "--data-dir", str(tmp_path / "none")])
    except SystemExit as exit_:
        rc = exit_.code
    err = capsys.readouterr().err
    assert rc == 2, err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and fragment in errors[0], err
    assert not out.exists()


# --- runs ------------------------------------------------------------------------------------


@pytest.fixture
def one_class_pairs(tmp_path):
    """6 clients as your own images: clients 2g and 2g + 1 hold only class g (3 groups)."""
    x, y = pattern_images(per_class=24, classes=3, seed=0)
    x = x[..., None].astype(np.float32) / 255.0
    order = np.argsort(y, kind="stable")
    x, y = x[order], y[order].astype(np.int64)
    client = np.concatenate([np.repeat([2 * g, 2 * g + 1], 12) for g in range(3)])
    px, py = pattern_images(per_class=4, classes=3, seed=1)
    images = from_images(
        x,
        y,
        client,
        proxy=(px[..., None].astype(np.float32) / 255.0, py.astype(np.int64)),
        groups=GROUPS.tolist(),
    )
    return write_images_npz(images, tmp_path / "pairs.npz")


def _auto(cls, path, **kwargs):
    options = dict(num_clients=6, rounds=2, batch_size=8, max_clusters=5, clusters="auto")
    return cls(dataset=str(path), **{**options, **kwargs})


def _rows(out):
    with open(out / "metrics.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_ifca_auto_finds_the_groups_and_records_the_choice(one_class_pairs, tmp_path, tff_context):
    config = _auto(IFCAConfig, one_class_pairs)
    out = tmp_path / "run"
    summary = run_clustered_images(config, out, progress=False)
    record = json.loads((out / "cluster_choice.json").read_text())
    assert record["chosen"] == summary["clusters_chosen"] == 3
    assert set(record["silhouette"]) == {"2", "3", "4", "5"}
    assert record["signal"] == "update" and record["max_clusters"] == 5
    recorded = json.loads((out / "config.json").read_text())
    assert recorded["clusters"] == "auto" and recorded["max_clusters"] == 5
    rows = _rows(out)
    # round 1 trained the cut: its clusters are the groups
    assert float(rows[0]["ari"]) == pytest.approx(1.0)
    # the pass (6 updates up, 6 models down) is counted in round 1's traffic
    params = summary["params"]
    assert float(rows[0]["uplink_mb"]) == pytest.approx(4 * params * 12 / 1e6, rel=1e-5)
    assert float(rows[0]["downlink_mb"]) == pytest.approx(4 * params * 12 / 1e6, rel=1e-5)
    assert float(rows[1]["uplink_mb"]) == pytest.approx(4 * params * 6 / 1e6, rel=1e-5)
    assert not (out / "checkpoint.npz").exists()


@pytest.mark.slow
def test_cfl_fixed_auto_runs_with_the_chosen_k(one_class_pairs, tmp_path, tff_context):
    out = tmp_path / "run"
    summary = run_clustered_images(_auto(CFLFixedConfig, one_class_pairs), out, progress=False)
    assert summary["clusters_chosen"] == 3
    assert [int(r["clusters"]) for r in _rows(out)] == [3, 3]
    assert json.loads((out / "cluster_choice.json").read_text())["chosen"] == 3
    # a fixed K records no choice
    fixed = tmp_path / "fixed"
    plain = run_clustered_images(
        _auto(CFLFixedConfig, one_class_pairs, clusters=3), fixed, progress=False
    )
    assert "clusters_chosen" not in plain and not (fixed / "cluster_choice.json").exists()
    # the chosen K trains exactly as that K given: every client starts from w0 in round 1
    for column in ("acc", "train_loss", "clusters", "ari"):
        assert [r[column] for r in _rows(out)] == [r[column] for r in _rows(fixed)], column
    assert summary["final_acc"] == plain["final_acc"]


@pytest.mark.slow
def test_a_resumed_run_keeps_its_choice(one_class_pairs, tmp_path, monkeypatch, tff_context):
    config = _auto(IFCAConfig, one_class_pairs, rounds=3)
    straight = run_clustered_images(config, tmp_path / "a", progress=False)
    out = tmp_path / "b"
    interrupted(
        monkeypatch, lambda: run_clustered_images(config, out, progress=False), after_round=1
    )

    def never(*_args, **_kwargs):
        raise AssertionError("a resumed run does not choose K again")

    monkeypatch.setattr(auto_clusters, "pass_signals", never)
    monkeypatch.setattr(auto_clusters, "choose_clusters", never)
    resumed = run_clustered_images(config, out, progress=False)
    drop = ("wall_s",)
    assert {k: v for k, v in resumed.items() if k not in drop} == {
        k: v for k, v in straight.items() if k not in drop
    }
    # the same seed chose the same K from the same silhouettes
    choice_a = json.loads((tmp_path / "a" / "cluster_choice.json").read_text())
    assert json.loads((out / "cluster_choice.json").read_text()) == choice_a


@pytest.mark.slow
def test_a_checkpoint_without_the_choice_is_refused(one_class_pairs, tmp_path, tff_context):
    config = _auto(IFCAConfig, one_class_pairs)
    fed = experiment.build_federation(config, None)
    spec = experiment.model_spec(config, fed)
    run = RunDir(tmp_path / "run", config.recorded())
    arrays, scalars = ClusterState(
        [list(spec.initial_weights().trainable)], np.zeros(6, np.int64)
    ).to_checkpoint()
    run.save_checkpoint(1, arrays, scalars)
    with pytest.raises(DataError, match="lacks the choice of K"):
        auto_clusters.settle(config, spec, fed, run)
