"""AS-CFL and its baselines end to end on fixture images (the official idx format): a tiny
run per method, resume equals uninterrupted, bad input before any file."""

from __future__ import annotations

import csv
import dataclasses
import json

import numpy as np
import pytest

from fedprune.algorithms.ascfl import experiment, federation
from fedprune.algorithms.ascfl.compose import reporting
from fedprune.algorithms.ascfl.experiment import run_clustered_images
from fedprune.configs.ascfl import (
    ALGORITHM_1_LITERAL,
    CFLConfig,
    CFLFixedConfig,
    ClusteredImageConfig,
    IFCAConfig,
)
from fedprune.data import images
from fedprune.errors import ConfigError
from tests.algorithms.test_fedcref_run import pattern_images
from tests.conftest import interrupted
from tests.data.test_images import write_idx_pair

pytestmark = pytest.mark.slow
# two rounds: the warm-up (5 rounds by default) off
TINY = dict(num_clients=4, proxy_size=20, rounds=2, batch_size=16, min_frac=0.5, max_frac=1.0)
TINY["warmup_rounds"] = 0
ALGORITHM1 = dict(ALGORITHM_1_LITERAL)  # the earlier defaults: Algorithm 1 read literally


@pytest.fixture
def image_dir(tmp_path):
    for split, seed in (("train", 0), ("test", 1)):
        x, y = pattern_images(per_class=30, classes=6, seed=seed)
        write_idx_pair(tmp_path / "mnist", images.file_names("mnist", split), x, y)
    return tmp_path


@pytest.mark.parametrize(
    "config",
    [
        ClusteredImageConfig(**TINY),
        ClusteredImageConfig(**TINY, without="incentive", clip_norm=0.5, noise_multiplier=0.1),
        ClusteredImageConfig(**TINY, proxy_rotation="none", admission="similarity_gate"),
        ClusteredImageConfig(**{**TINY, **ALGORITHM1}),
        CFLConfig(**TINY),
        CFLFixedConfig(**TINY, clusters=2),
        IFCAConfig(**TINY, clusters=2),
        IFCAConfig(**TINY, clusters=1, client_dropout=0.25),
    ],
    ids=[
        "ascfl",
        "ascfl-noise-no-incentive",
        "ascfl-upright-proxy",
        "ascfl-algorithm1-literal",
        "cfl",
        "cfl-fixed",
        "ifca",
        "fedavg-dropout",
    ],
)
def test_a_tiny_run_writes_its_files(config, image_dir, tmp_path, tff_context):
    out = tmp_path / "run"
    summary = run_clustered_images(config, out, image_dir, progress=False)
    assert summary["rounds"] == 2 and 0.0 <= summary["final_acc"] <= 1.0
    assert summary["labels"] == config.labels
    rows = (out / "metrics.csv").read_text().splitlines()
    assert len(rows) == 3 and "ari" in rows[0] and "stability" in rows[0]
    assert json.loads((out / "config.json").read_text())["method"] == config.method
    assert not (out / "checkpoint.npz").exists()
    if config.noise_multiplier > 0:
        assert summary["privacy"]["epsilon"] > 0
    if config.method == "ifca" and config.clusters == 1:
        assert summary["clusters"] == 1
    # a finished run is returned as it is
    assert run_clustered_images(config, out, image_dir, progress=False) == summary


def test_warmup_rounds_train_one_model_then_cluster(image_dir, tmp_path, tff_context):
    config = ClusteredImageConfig(**{**TINY, "rounds": 3, "warmup_rounds": 2})
    run_clustered_images(config, tmp_path / "run", image_dir, progress=False)
    with open(tmp_path / "run" / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    # FedAvg in rounds 1-2: one model, nobody moved; Stage 1 runs in round 3
    assert [int(r["clusters"]) for r in rows[:2]] == [1, 1]
    assert [float(r["stability"]) for r in rows[:2]] == [1.0, 1.0]
    assert json.loads((tmp_path / "run" / "config.json").read_text())["warmup_rounds"] == 2
    # the low-rank uplink of the whole run: full updates in the warm-up, compressed after
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    full = sum(float(r["uplink_mb"]) for r in rows[:2])
    assert summary["uplink_lowrank_mb"] == pytest.approx(full + float(rows[2]["uplink_lowrank_mb"]))
    assert float(rows[2]["uplink_lowrank_mb"]) < float(rows[2]["uplink_mb"])
    literal = ClusteredImageConfig(**{**TINY, **ALGORITHM1}).recorded()
    assert "warmup_rounds" not in literal  # run directories from before the option resume


def _rows(path):
    with open(path / "metrics.csv") as f:
        return list(csv.DictReader(f))


def test_a_client_absent_when_clusters_form_joins_by_lowest_loss(image_dir, tmp_path, tff_context):
    # one of the 4 clients misses each round, so one misses round 1, where Stage 1 forms the
    # clusters (no warm-up); when it next reports it receives all K models once (downlink)
    config = ClusteredImageConfig(**{**TINY, "rounds": 4, "client_dropout": 0.25})
    assert config.recorded()["late_clients"] == "lowest_loss"
    assert "late_clients" not in ClusteredImageConfig(**TINY).recorded()  # no dropout
    # a dropout run from before the option (which followed) resumes as --late-clients follow
    assert "late_clients" not in dataclasses.replace(config, late_clients="follow").recorded()
    absent = set(range(4)) - set(reporting(config, 1).tolist())
    back = next(t for t in range(2, 5) if absent <= set(reporting(config, t).tolist()))
    for rule in ("lowest_loss", "follow"):
        out = tmp_path / rule
        run_clustered_images(
            dataclasses.replace(config, late_clients=rule), out, image_dir, progress=False
        )
        rows = _rows(out)
        per_model = float(rows[0]["downlink_mb"]) / int(rows[0]["reporting"])
        k = int(rows[back - 2]["clusters"])  # the models the late client chooses from
        assert k > 1
        for t, row in enumerate(rows, 1):
            extra = k - 1 if rule == "lowest_loss" and t == back else 0
            expected = per_model * (int(row["reporting"]) + extra)
            assert float(row["downlink_mb"]) == pytest.approx(expected, rel=1e-5), (rule, t)


@pytest.mark.parametrize(
    "options",
    [{}, ALGORITHM1, {"rounds": 4, "client_dropout": 0.25}],
    ids=["default", "algorithm1", "late-client"],
)
def test_resume_equals_uninterrupted(options, image_dir, tmp_path, monkeypatch, tff_context):
    config = ClusteredImageConfig(**{**TINY, "rounds": 3, **options})
    straight = run_clustered_images(config, tmp_path / "a", image_dir, progress=False)
    out = tmp_path / "b"
    interrupted(
        monkeypatch,
        lambda: run_clustered_images(config, out, image_dir, progress=False),
        after_round=2,
    )
    resumed = run_clustered_images(config, out, image_dir, progress=False)
    drop = ("wall_s",)
    assert {k: v for k, v in resumed.items() if k not in drop} == {
        k: v for k, v in straight.items() if k not in drop
    }
    a = np.genfromtxt(tmp_path / "a" / "metrics.csv", delimiter=",", names=True)
    b = np.genfromtxt(out / "metrics.csv", delimiter=",", names=True)
    np.testing.assert_array_equal(a["acc"], b["acc"])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(alpha=0.0), "--alpha"),
        (dict(min_frac=0.7, max_frac=0.5), "--min-frac"),
        (dict(split_threshold=0.2, merge_threshold=0.3), "--split-threshold"),
        (dict(noise_multiplier=1.0), "--clip-norm"),
        (dict(theta=1.5), "--theta"),
        (dict(clip_norm=0.0), "--clip-norm"),
        (dict(rounds=5, warmup_rounds=5), "--warmup-rounds 5 leaves none of the 5 rounds"),
        (dict(warmup_rounds=-1), "--warmup-rounds"),
    ],
)
def test_bad_parameters_are_one_line(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        ClusteredImageConfig(**kwargs)


def test_the_proxy_rotation_option_reaches_the_partition(image_dir):
    upright = experiment.build_federation(
        ClusteredImageConfig(**TINY, proxy_rotation="none"), image_dir
    )
    mixed = experiment.build_federation(ClusteredImageConfig(**TINY), image_dir)
    assert set(upright.proxy_angle.tolist()) == {0}
    assert set(mixed.proxy_angle.tolist()) == {0, 90, 180, 270}


@pytest.mark.parametrize("config", [ClusteredImageConfig(**TINY), IFCAConfig(**TINY, clusters=2)])
def test_a_given_federation_and_model_are_used_instead_of_loading(
    config, image_dir, tmp_path, monkeypatch, tff_context
):
    loaded = run_clustered_images(config, tmp_path / "loaded", image_dir, progress=False)
    fed = experiment.build_federation(config, image_dir)
    spec = experiment.model_spec(config, fed)

    def no_loading(*_args):
        raise AssertionError("the federation was given")

    monkeypatch.setattr(federation, "build_federation", no_loading)
    given = run_clustered_images(
        config, tmp_path / "given", federation=fed, spec=spec, progress=False
    )
    assert {k: v for k, v in given.items() if k != "wall_s"} == {
        k: v for k, v in loaded.items() if k != "wall_s"
    }
