"""``--recluster split-merge`` (:mod:`fedprune.algorithms.pipeline.recluster`): AS-CFL's
split/merge pass on toy signals whose answer is arithmetic, the new clusters' models and masks,
the record and its checkpoint form, the options' errors; end to end on the fixture data (slow):
the record, resume, and ``--recluster none`` writing what it always wrote."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from fedprune.algorithms.pipeline.recluster import (
    ReclusterEvent,
    ReclusterRule,
    cap_splits,
    common_model,
    event_of,
    events_from_arrays,
    events_to_arrays,
    merged_cluster,
    regroup_models,
    renumber,
)
from fedprune.configs.command_line import config_from_options
from fedprune.configs.pipeline import CAAFPConfig, GlobalFTConfig
from fedprune.errors import ConfigError


def _group(direction, n: int = 3, noise: float = 1e-3) -> np.ndarray:
    """``n`` clients whose signals point (almost) along ``direction`` (noise seeded by it)."""
    d = np.asarray(direction, np.float64)
    rng = np.random.default_rng([n, *(int(1000 * x) for x in direction)])
    return d / np.linalg.norm(d) + rng.normal(0, noise, size=(n, len(d)))


# --- the pass -------------------------------------------------------------------------------
def test_two_groups_forced_into_one_cluster_are_split():
    # A = e1, B = e2 share cluster 0; C lies near their centroid, so cluster 0's dispersion
    # (0.71) is large against its separation from C (0.73): G = 0.97 > 0.8. Each half, one
    # group, has G ~ 0 after the split, so the halves guard lets it through.
    a, b, c = _group([1, 0, 0]), _group([0, 1, 0]), _group([1, 1, 1.5])
    signals = np.vstack([a, b, c])
    labels = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1])
    adjustment, after, capped = ReclusterRule(every=5).adjust(signals, labels, np.ones(9))
    assert adjustment.geometry.ratio[0] == pytest.approx(0.97, abs=0.02)
    assert after.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]  # numbered by first client
    assert capped == 0
    event = event_of(7, labels, after, adjustment, capped)
    assert (event.k_before, event.k_after) == (2, 3)
    assert event.splits() == [(0, [0, 1])] and event.merges() == []
    assert event.split_pairs() == ((frozenset({0, 1, 2}), frozenset({3, 4, 5})),)


def test_below_the_split_threshold_nothing_splits():
    a, b, c = _group([1, 0, 0]), _group([0, 1, 0]), _group([1, 1, 1.5])
    signals = np.vstack([a, b, c])
    labels = np.array([0] * 6 + [1] * 3)
    _, after, _ = ReclusterRule(every=5, split_threshold=1.0).adjust(signals, labels, np.ones(9))
    assert after.tolist() == labels.tolist()


def test_split_guard_none_splits_a_group_of_like_clients():
    # one loose group (noise 0.3 around e1) beside a tight one: its G is above beta, but its
    # halves sit close together (their G stays above beta): the halves guard refuses, AS-CFL
    # as written splits
    loose, tight = _group([1, 0, 0, 0], n=6, noise=0.3), _group([0, 1, 0, 0], n=3)
    signals = np.vstack([loose, tight])
    labels = np.array([0] * 6 + [1] * 3)
    rule = ReclusterRule(every=5, split_threshold=0.3)
    adjustment, guarded, _ = rule.adjust(signals, labels, np.ones(9))
    assert adjustment.geometry.ratio[0] > 0.3
    assert guarded.tolist() == labels.tolist()
    _, unguarded, _ = dataclasses.replace(rule, split_guard="none").adjust(
        signals, labels, np.ones(9)
    )
    assert unguarded.max() + 1 == 3


def test_two_parts_of_one_group_are_merged():
    # clusters 0 and 1 are two tight parts of one group (directions 0.05 apart), cluster 2 is
    # far away: G of the parts ~ 0.02 < 0.2, and their union is compact (G ~ 0.02 <= 0.2)
    a1, a2, b = _group([1, 0, 0], noise=1e-4), _group([1, 0.05, 0], noise=1e-4), _group([0, 0, 1])
    signals = np.vstack([a1, a2, b])
    labels = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2])
    adjustment, after, _ = ReclusterRule(every=5).adjust(signals, labels, np.ones(9))
    assert max(adjustment.geometry.ratio[:2]) < 0.2
    assert after.tolist() == [0, 0, 0, 0, 0, 0, 1, 1, 1]
    event = event_of(3, labels, after, adjustment, 0)
    assert event.merges() == [([0, 1], 0)] and event.splits() == []
    assert (event.k_before, event.k_after) == (3, 2)


def test_a_merge_may_not_reunite_the_previous_split():
    a1, a2, b = _group([1, 0, 0], noise=1e-4), _group([1, 0.05, 0], noise=1e-4), _group([0, 0, 1])
    signals = np.vstack([a1, a2, b])
    labels = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2])
    previous = ((frozenset({0, 1, 2}), frozenset({3, 4, 5})),)
    _, after, _ = ReclusterRule(every=5).adjust(signals, labels, np.ones(9), previous)
    assert after.tolist() == labels.tolist()


def test_the_cap_undoes_the_least_dispersed_splits_first():
    # both clusters hold two groups; with at most 3 clusters only the one with the larger G
    # is split
    groups = [_group(d) for d in ([1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0.2, 1])]
    signals = np.vstack(groups)
    labels = np.array([0] * 6 + [1] * 6)
    rule = ReclusterRule(every=5, split_threshold=0.3, max_clusters=4)
    adjustment, both, _ = rule.adjust(signals, labels, np.ones(12))
    assert both.max() + 1 == 4
    ratio = adjustment.geometry.ratio
    _, capped, undone = dataclasses.replace(rule, max_clusters=3).adjust(
        signals, labels, np.ones(12)
    )
    assert undone == 1 and capped.max() + 1 == 3
    kept = int(np.argmax(ratio))  # the more dispersed cluster stays split
    split_members = np.flatnonzero(labels == kept)
    assert len(set(capped[split_members].tolist())) == 2
    assert cap_splits(adjustment, renumber(labels), 4)[1] == 0


def test_rule_from_config_and_schedule():
    assert ReclusterRule.from_config(CAAFPConfig("uci_har")) is None
    config = CAAFPConfig("uci_har", recluster="split-merge", recluster_every=10, block=16)
    rule = ReclusterRule.from_config(config)
    assert (rule.every, rule.split_threshold, rule.merge_threshold) == (10, 0.8, 0.2)
    assert (rule.split_guard, rule.max_clusters, rule.block) == ("halves", 8, 16)
    # before Phase 2-3 rounds 11, 21, 31, 41 of 50
    assert [j for j in range(1, 51) if rule.due(j)] == [11, 21, 31, 41]


# --- models and masks -----------------------------------------------------------------------
def test_a_split_copies_its_parent_and_a_merge_averages_its_parts():
    w = {0: [np.array([[1.0]]), np.array([1.0])], 1: [np.array([[4.0]]), np.array([2.0])]}
    m = {c: [np.ones((1, 1), np.float32), np.ones(1, np.float32)] for c in w}
    m[1] = [np.zeros((1, 1), np.float32), np.ones(1, np.float32)]
    # clients 0-1 in cluster 0 split in two; clients 2-3 (cluster 1) stay together
    before, after = np.array([0, 0, 1, 1]), np.array([0, 1, 2, 2])
    new_w, new_m = regroup_models(w, m, before, after, np.ones(4), [True, False])
    assert [float(new_w[c][0][0, 0]) for c in range(3)] == [1.0, 1.0, 4.0]
    assert float(new_m[2][0][0, 0]) == 0.0
    new_w[0][0][0, 0] = 9.0  # copies, not views
    assert float(w[0][0][0, 0]) == 1.0 and float(new_w[1][0][0, 0]) == 1.0
    # clients 0-1 (cluster 0, 3 + 1 windows) and 2-3 (cluster 1, 2 + 2) merge
    sizes = np.array([3.0, 1.0, 2.0, 2.0])
    merged_w, merged_m = regroup_models(w, m, before, np.zeros(4, np.int64), sizes, [True, False])
    assert list(merged_w) == [0]
    # dense kernel mask (union of 1 and 0 = 1, sparsity max(0, 1) = 1 over one weight: pruned)
    assert merged_m[0][0].tolist() == [[0.0]] and merged_w[0][0].tolist() == [[0.0]]
    assert merged_w[0][1].tolist() == [pytest.approx((4 * 1.0 + 4 * 2.0) / 8)]


def test_merged_mask_is_the_union_re_pruned_by_magnitude():
    # kernel (2, 2) pruned, bias (2,) not; parts at sparsity 0.5 with 3 and 1 windows
    a = [np.array([[4.0, 0.0], [0.0, 2.0]], np.float32), np.array([1.0, 1.0], np.float32)]
    b = [np.array([[0.0, 8.0], [0.0, 1.0]], np.float32), np.array([5.0, 5.0], np.float32)]
    ma = [np.array([[1, 0], [0, 1]], np.float32), np.ones(2, np.float32)]
    mb = [np.array([[0, 1], [0, 1]], np.float32), np.ones(2, np.float32)]
    w, m = merged_cluster([a, b], [ma, mb], [3.0, 1.0], [True, False])
    # average [[3, 2], [0, 1.75]]; union keeps 3 weights; re-pruned to 50 %: the two largest
    assert m[0].tolist() == [[1.0, 1.0], [0.0, 0.0]]
    assert w[0].tolist() == [[3.0, 2.0], [0.0, 0.0]]
    assert w[1].tolist() == [2.0, 2.0] and m[1].tolist() == [1.0, 1.0]
    assert w[0].dtype == np.float32 and m[0].dtype == np.float32


def test_dense_parts_merge_into_their_weighted_average():
    a = [np.array([[1.0, 2.0]], np.float32)]
    b = [np.array([[3.0, 6.0]], np.float32)]
    ones = [np.ones((1, 2), np.float32)]
    w, m = merged_cluster([a, b], [ones, ones], [1.0, 1.0], [True])
    assert w[0].tolist() == [[2.0, 4.0]] and m[0].tolist() == [[1.0, 1.0]]


def test_common_model_weights_clusters_by_their_windows():
    w = {0: [np.array([0.0])], 1: [np.array([4.0])]}
    assert common_model(w, np.array([0, 1, 1]), np.array([2.0, 1.0, 1.0]))[0].tolist() == [2.0]


# --- the record -----------------------------------------------------------------------------
def _events() -> list[ReclusterEvent]:
    return [
        ReclusterEvent(5, np.array([0, 0, 1, 1]), np.array([0, 1, 2, 2]), np.array([0.9, 0.1])),
        ReclusterEvent(
            9, np.array([0, 1, 2, 2]), np.array([0, 0, 1, 1]), np.array([0.1, 0.1, 0.3]), 1
        ),
    ]


def test_events_survive_the_checkpoint_form():
    events = [
        *_events(),
        ReclusterEvent(12, np.array([0, 0, 1, 1]), np.array([0, 0, 1, 1]), np.array([np.inf, 0])),
        ReclusterEvent(15, np.array([0, 0, 0, 0]), np.array([0, 0, 0, 0]), np.array([np.nan])),
    ]
    arrays = events_to_arrays(events, 4)
    assert [a.shape for a in arrays] == [(4,), (4, 4), (4, 4), (4, 4), (4,)]
    assert all(np.isfinite(a).all() for a in arrays)  # a checkpoint refuses anything else
    back = events_from_arrays(arrays)
    for old, new in zip(events, back):
        assert new.round == old.round and new.capped == old.capped
        assert new.before.tolist() == old.before.tolist()
        assert new.after.tolist() == old.after.tolist()
        np.testing.assert_array_equal(new.ratio, old.ratio)
    assert back[2].record([1, 2, 3, 4])["G"] == {"0": "inf", "1": 0.0}
    assert back[3].record([1, 2, 3, 4])["G"] == {"0": None}


def test_the_record_names_rounds_clusters_and_clients():
    split, merge = (e.record([10, 11, 12, 13]) for e in _events())
    assert split == {
        "round": 5,
        "clusters_before": 2,
        "clusters_after": 3,
        "G": {"0": 0.9, "1": 0.1},
        "splits": [{"cluster": 0, "into": [0, 1], "clients": [[10], [11]]}],
        "merges": [],
        "splits_undone_for_max_clusters": 0,
    }
    assert merge["merges"] == [{"clusters": [0, 1], "into": 0, "clients": [10, 11]}]
    assert merge["splits"] == [] and merge["splits_undone_for_max_clusters"] == 1
    json.dumps(split)  # plain JSON


def test_the_checkpoint_round_trips_the_passes():
    from fedprune.algorithms.caafp.communication import CommAccounts
    from fedprune.algorithms.pipeline.state import PipelineState

    state = PipelineState([np.zeros(2)], CommAccounts(2, 2, 2), np.array([0, 0, 1, 1]))
    for c in range(3):
        state.cluster_w[c] = [np.full(2, c)]
        state.cluster_m[c] = [np.ones(2)]
    arrays, scalars = state.to_checkpoint()
    assert "reclusters" not in arrays  # no pass yet: what runs always wrote
    state.reclusters = _events()
    arrays, scalars = state.to_checkpoint()
    back = PipelineState.from_checkpoint(arrays, scalars, None, lambda s: CommAccounts(2, 2, 2, s))
    assert back.clusters == 3
    assert [e.round for e in back.reclusters] == [5, 9]
    assert back.reclusters[-1].split_pairs() == ()


# --- options --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "options, message",
    [
        (
            dict(clusters=1),
            "--recluster split-merge needs at least 2 clusters to compare (G_k divides a "
            "cluster's dispersion by its distance to the nearest other one): give --clusters "
            "2 or more, or auto",
        ),
        (
            dict(phases=(0, 0, 10)),
            "--recluster-every 10 leaves no split/merge pass in the 10 rounds of Phases 2-3 "
            "(--phases 0,0,10; a pass runs before round N + 1, 2N + 1, ... of them): give "
            "--recluster-every 9 or less",
        ),
        (
            dict(phases=(5, 1, 0)),
            "--recluster split-merge needs at least 2 rounds of Phases 2-3 (a pass runs "
            "between two of them), --phases 5,1,0 has 1",
        ),
        (
            dict(split_threshold=0.2),
            "--split-threshold 0.2 must be above --merge-threshold 0.2, else a cluster could "
            "be both split and merged",
        ),
        (
            dict(clusters=5, max_clusters=4),
            "--clusters 5 is above --max-clusters 4, the most clusters --recluster "
            "split-merge may make: give --max-clusters 5 or more",
        ),
        (
            dict(clients_per_round=6),
            "--clients-per-round 6 is below --max-clusters 8, the most clusters --recluster "
            "split-merge may make: every Phase 2-3 round trains at least one client per "
            "cluster; give --clients-per-round 8 or more, or --max-clusters 6 or less",
        ),
        (dict(recluster_every=0), "--recluster-every must be an integer >= 1, got 0"),
        (dict(split_threshold=0.0), "--split-threshold must be"),
        (dict(merge_threshold=-0.1), "--merge-threshold must be"),
        (dict(split_guard="both"), "--split-guard must be one of halves, none"),
    ],
)
def test_impossible_settings_are_one_line(options, message):
    with pytest.raises(ConfigError) as err:
        CAAFPConfig("uci_har", recluster="split-merge", **options)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_recluster_is_refused_where_there_is_one_cluster():
    with pytest.raises(ConfigError, match="--recluster split-merge needs at least 2 clusters"):
        GlobalFTConfig("uci_har", recluster="split-merge")


def test_unknown_recluster_value_is_refused():
    with pytest.raises(ConfigError, match="--recluster must be one of none, split-merge"):
        CAAFPConfig("uci_har", recluster="em")


def test_split_merge_options_need_recluster(tmp_path):
    import argparse

    from fedprune.configs.command_line import add_config_options

    parser = argparse.ArgumentParser()
    add_config_options(parser, CAAFPConfig)
    args = parser.parse_args(["--dataset", "uci_har", "--split-threshold", "0.6"])
    with pytest.raises(ConfigError) as err:
        config_from_options(CAAFPConfig, args, "train caafp")
    assert str(err.value) == (
        "--split-threshold: not used by train caafp with the options given; leave it out"
    )
    args = parser.parse_args(
        ["--dataset", "uci_har", "--recluster", "split-merge", "--split-threshold", "0.6"]
    )
    config = config_from_options(CAAFPConfig, args, "train caafp")
    assert (config.recluster, config.split_threshold, config.max_clusters) == (
        "split-merge",
        0.6,
        8,
    )


def test_runs_made_before_the_option_resume():
    later = CAAFPConfig.ADDED_LATER
    assert later["recluster"] == "none" and later["recluster_every"] == 10
    assert (later["split_threshold"], later["merge_threshold"]) == (0.8, 0.2)
    assert later["split_guard"] == "halves"
    defaults = CAAFPConfig("uci_har")
    for name in ("recluster", "recluster_every", "split_threshold", "merge_threshold"):
        assert getattr(defaults, name) == later[name]


# --- end to end on the fixture data (6 clients) ---------------------------------------------
ONE_CLASS = CAAFPConfig(
    "uci_har",
    phases=(0, 2, 4),  # round 1 clusters; passes before rounds 3, 4, ..., 7
    clusters=2,
    clients_per_round=4,
    max_clusters=4,
    local_epochs=1,
    start_sparsity=0.5,
    target_sparsity=0.7,
    prune_frequency=2,
    ft_epochs=(1,),
    classes_per_client=1,
    recluster="split-merge",
    recluster_every=1,
    split_threshold=0.3,
    merge_threshold=0.1,
)


def _results(run):
    from fedprune.runs import artefacts

    return (
        json.loads((run / "summary.json").read_text()),
        artefacts.read_reclusters(run),
        artefacts.read_clusters(run),
    )


@pytest.mark.slow
def test_passes_are_recorded_and_replayed_on_resume(
    tff_context, tmp_path, fixture_data_dir, monkeypatch
):
    from fedprune.algorithms.pipeline import run_method
    from tests.conftest import interrupted

    full = run_method(ONE_CLASS, tmp_path / "full", fixture_data_dir, progress=False)
    summary, passes, clusters = _results(tmp_path / "full")
    assert [p["round"] for p in passes] == [3, 4, 5, 6, 7]
    assert summary["recluster_passes"] == 5
    assert summary["clusters_initial"] == 2 == passes[0]["clusters_before"]
    assert summary["clusters_final"] == passes[-1]["clusters_after"] == len(summary["clusters"])
    assert len(set(clusters.values())) == summary["clusters_final"]
    for before, after in zip(passes, passes[1:]):
        assert after["clusters_before"] == before["clusters_after"]
    changes = [p for p in passes if p["splits"] or p["merges"]]
    assert summary["recluster_changes"] == len(changes) >= 1
    # every cluster, new ones included, keeps the schedule's sparsity
    assert all(s == pytest.approx(0.7, abs=1e-3) for s in summary["cluster_sparsity"].values())
    # each pass's signal is the clustering step's traffic again
    one = 6 * 2 * summary["params"] * 4 / 1e6  # 6 clients, download + upload, float32
    by_kind = summary["comm_mb_eq13_by_kind"]
    assert by_kind["clustering"] == pytest.approx(6 * one, rel=1e-3)

    interrupted(  # after the second pass
        monkeypatch,
        lambda: run_method(ONE_CLASS, tmp_path / "resumed", fixture_data_dir, progress=False),
        after_round=4,
    )
    resumed = run_method(ONE_CLASS, tmp_path / "resumed", fixture_data_dir, progress=False)
    assert _results(tmp_path / "resumed")[1:] == (passes, clusters)
    for key in ("finetune", "clusters", "cluster_sparsity", "comm_mb_eq13", "clusters_final"):
        assert resumed[key] == full[key], key


@pytest.mark.slow
def test_recluster_none_writes_what_runs_always_wrote(tff_context, tmp_path, fixture_data_dir):
    from fedprune.algorithms.pipeline import run_method
    from fedprune.runs import artefacts

    fixed = dataclasses.replace(
        ONE_CLASS,
        recluster="none",
        recluster_every=10,
        split_threshold=0.8,
        merge_threshold=0.2,
        max_clusters=8,
    )
    summary = run_method(fixed, tmp_path / "run", fixture_data_dir, progress=False)
    assert not (tmp_path / "run" / "reclusters.json").exists()
    assert not {"clusters_initial", "clusters_final", "recluster_passes"} & set(summary)
    assert "reclusters" not in artefacts.read_checkpoint_arrays(tmp_path / "run")
    assert len(summary["clusters"]) == 2
