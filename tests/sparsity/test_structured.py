"""Structured masks (``--structure filters``): the unit graph of a model, masks that remove
whole filters and units with the next kernel's rows, the budget in units, and the
configuration's checks."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from fedprune.algorithms.caafp.prune_and_heal import PruneAndHeal
from fedprune.algorithms.pipeline.policy import with_structure
from fedprune.configs.pipeline import STRUCTURES, CAAFPConfig, EfficientFLConfig, FedCHARConfig
from fedprune.errors import ConfigError
from fedprune.models.cnn1d import build_har_cnn
from fedprune.models.cnn1d_small import build_har_cnn_small
from fedprune.sparsity import structured as S
from fedprune.sparsity.layers import prunable_mask_flags, scope_flags, select
from fedprune.sparsity.schedule import PruneHealSchedule

L = tf.keras.layers


def _graph(model: tf.keras.Model, layers=None) -> S.UnitGraph:
    return S.unit_graph(model, scope_flags(model, layers))


@pytest.fixture(scope="module")
def har_cnn() -> tf.keras.Model:
    return build_har_cnn((128, 9), 6, seed=0)


def _random(graph: S.UnitGraph, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.random(s) for s in graph.shapes]


def _ones(graph: S.UnitGraph) -> list[np.ndarray]:
    return [np.ones(s, np.float32) for s in graph.shapes]


def test_structures_agree_with_the_configuration():
    assert S.STRUCTURES == STRUCTURES


def test_the_paper_model_prunes_conv_filters_and_hidden_units_never_the_classes(har_cnn):
    graph = _graph(har_cnn)
    found = [(g.layer, g.consumer_layer, g.units, g.through) for g in graph.groups]
    assert found == [
        ("conv1", "conv2", 64, ("pool1", "drop1")),
        ("conv2", "dense", 64, ("pool2", "drop2", "flatten")),
        ("dense", "probs", 32, ("drop3",)),
    ]
    assert [name for name, _ in graph.kept] == ["probs"]
    small = _graph(build_har_cnn_small((128, 9), 6, seed=0))
    assert [(g.layer, g.consumer_layer) for g in small.groups] == [
        ("conv1", "conv2"), ("conv2", "conv3"), ("conv3", "dense"), ("dense", "probs")
    ]  # fmt: skip


def test_a_removed_unit_takes_its_column_and_every_row_that_reads_it(har_cnn):
    graph = _graph(har_cnn)
    keep = [np.ones(g.units, bool) for g in graph.groups]
    keep[0][[3, 10]] = False  # two conv1 filters
    keep[1][5] = False  # one conv2 filter: 32 time steps x 64 channels after Flatten
    masks = S.weight_masks(graph, keep)
    conv1, conv2, dense, probs = masks
    assert np.all(conv1[..., [3, 10]] == 0) and conv1.sum() == 5 * 9 * 62
    assert np.all(conv2[:, [3, 10], :] == 0) and np.all(conv2[..., 5] == 0)
    assert conv2.sum() == 5 * 62 * 63
    rows = np.arange(2048)
    assert np.all(dense[rows % 64 == 5] == 0) and dense.sum() == (2048 - 32) * 32
    assert probs.min() == 1  # the classifier's outputs (and its inputs here) stay
    assert [np.flatnonzero(~k).tolist() for k in S.unit_masks(graph, masks)] == [[3, 10], [5], []]


@pytest.mark.parametrize("budget", ["global", "layerwise"])
@pytest.mark.parametrize("target", [0.5, 0.7, 0.85])
def test_prune_to_removes_the_target_fraction_of_units(har_cnn, budget, target):
    graph = _graph(har_cnn)
    masks = S.StructuredMasks(graph, budget).prune_to(_ones(graph), _random(graph, 1), target)
    parts = 1 if budget == "global" else len(graph.groups)  # each rounds its count
    assert abs(S.unit_sparsity(graph, masks) - target) <= parts * 0.5 / graph.n_units + 1e-9
    kept = [int(k.sum()) for k in S.unit_masks(graph, masks)]
    if budget == "layerwise":
        assert kept == [round((1 - target) * g.units) for g in graph.groups]
    # every mask is whole units: equal to the masks its kept units give
    again = S.weight_masks(graph, S.unit_masks(graph, masks))
    assert all(np.array_equal(a, b) for a, b in zip(masks, again))


def test_units_are_ranked_by_the_mean_score_of_their_active_column(har_cnn):
    graph = _graph(har_cnn)
    scores = [np.full(s, 0.5) for s in graph.shapes]
    scores[2][:, 7] = 0.1  # dense unit 7: the lowest mean
    scores[0][0, 0, 12] = -100.0  # one weight of conv1 filter 12 (mean -1.7)
    masks = S.StructuredMasks(graph).prune_to(_ones(graph), scores, 2 / graph.n_units)
    removed = [np.flatnonzero(~k).tolist() for k in S.unit_masks(graph, masks)]
    assert removed == [[12], [], [7]]
    # the weights masked by the removed units no longer count in the kept units' means
    pooled = S.unit_scores(graph, [np.where(m > 0, 1.0, 9.0) for m in masks], masks)
    kept = S.unit_masks(graph, masks)
    assert all(np.allclose(p[k], 1.0) for p, k in zip(pooled, kept))


def test_no_group_loses_its_last_unit(har_cnn):
    graph = _graph(har_cnn)
    scores = _random(graph, 2)
    scores[2] -= 10  # the dense units score lowest of all
    masks = S.StructuredMasks(graph).prune_to(_ones(graph), scores, 0.99)
    assert [int(k.sum()) for k in S.unit_masks(graph, masks)] == [1, 1, 1]


@pytest.mark.parametrize("budget", ["global", "layerwise"])
def test_prune_and_heal_reaches_the_target_at_the_last_scoring_round(har_cnn, budget):
    graph = _graph(har_cnn)
    schedule = PruneHealSchedule(rounds=10, frequency=2, target_sparsity=0.85, start_sparsity=0.5)
    rule = S.StructuredMasks(graph, budget)
    masks = rule.prune_to(_ones(graph), _random(graph, 3), 0.5)
    seen = []
    for t in (2, 4, 6, 8):  # the scoring rounds after the start (t < T2)
        before = S.unit_masks(graph, masks)
        masks = rule.heal(schedule, t, masks, _random(graph, t), _random(graph, 100 + t))
        after = S.unit_masks(graph, masks)
        seen.append(S.unit_sparsity(graph, masks))
        assert any((~a & b).any() for a, b in zip(after, before))  # churn: some units regrew
    assert seen == sorted(seen) and abs(seen[-1] - 0.85) <= 1.5 / graph.n_units


def test_a_removed_unit_regrows_by_the_gradients_of_the_rows_it_feeds(har_cnn):
    graph = _graph(har_cnn)
    keep = [np.ones(g.units, bool) for g in graph.groups]
    keep[2][[4, 9]] = False
    masks = S.weight_masks(graph, keep)
    grads = [np.zeros(s) for s in graph.shapes]
    grads[3][9] = 1.0  # the classifier row that reads dense unit 9
    pooled = S.regrow_scores(graph, grads)[2]
    assert pooled[9] > 0 and pooled[4] == 0
    schedule = PruneHealSchedule(rounds=10, frequency=2, target_sparsity=2 / 160, churn=0.0)
    new = S.StructuredMasks(graph).heal(schedule, 2, masks, _random(graph, 0), grads)
    assert S.unit_masks(graph, new)[2][[4, 9]].tolist() == [False, False]  # nothing to churn


def test_an_unsupported_layer_between_two_kernels_is_one_line_naming_it():
    inputs = tf.keras.Input((16, 3))
    a = L.Conv1D(8, 3, padding="same", name="a")(inputs)
    b = L.Conv1D(8, 3, padding="same", name="b")(a)
    h = L.Add(name="skip")([a, b])
    h = L.Flatten()(h)
    model = tf.keras.Model(inputs, L.Dense(4, activation="softmax", name="out")(h))
    with pytest.raises(ConfigError) as err:
        _graph(model)
    assert "'a' feed several layers" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"layer 'skip' \(Add\) after 'b' is not supported"):
        _graph(model, ["b", "out"])
    lenient = S.unit_graph(model, prunable_mask_flags(model), strict=False)
    assert lenient.groups == () and {"a", "b"} <= dict(lenient.kept).keys()


def test_a_consumer_outside_the_pruned_layers_is_refused(har_cnn):
    with pytest.raises(ConfigError, match="prune 'conv2' too"):
        _graph(har_cnn, ["conv1"])
    with pytest.raises(ConfigError, match="none of the pruned kernels"):
        _graph(har_cnn, ["probs"])
    assert [g.layer for g in _graph(har_cnn, ["dense", "probs"]).groups] == ["dense"]


@pytest.mark.parametrize(
    "norm, pruned",
    [
        (lambda: L.LayerNormalization(axis=-1), False),  # mixes the channels
        (lambda: L.LayerNormalization(axis=1), True),  # over time, per channel
        (lambda: L.GroupNormalization(groups=2), False),
        (lambda: L.GroupNormalization(groups=-1), True),  # one channel per group
        (lambda: L.BatchNormalization(), True),
        (lambda: L.Activation("softmax"), False),
    ],
)
def test_normalizations_across_channels_keep_their_producer_whole(norm, pruned):
    inputs = tf.keras.Input((16, 3))
    h = L.Conv1D(8, 3, padding="same", name="conv")(inputs)
    h = L.Flatten()(norm()(h))
    model = tf.keras.Model(inputs, L.Dense(4, activation="softmax", name="out")(h))
    graph = S.unit_graph(model, prunable_mask_flags(model), strict=False)
    assert [g.layer for g in graph.groups] == (["conv"] if pruned else [])


def test_the_configuration_takes_structure_only_where_something_is_pruned():
    assert CAAFPConfig("uci_har", structure="filters").structure == "filters"
    assert EfficientFLConfig("uci_har", structure="filters").structure == "filters"
    with pytest.raises(ConfigError, match="fedchar .* trains no masked rounds"):
        FedCHARConfig("uci_har", structure="filters")
    with pytest.raises(ConfigError, match="--block 16 blocks of weights"):
        CAAFPConfig("uci_har", structure="filters", block=16)
    with pytest.raises(ConfigError, match="a merge joins two clusters' masks weight by weight"):
        CAAFPConfig("uci_har", structure="filters", recluster="split-merge")
    with pytest.raises(ConfigError, match="--structure must be one of weights, filters"):
        CAAFPConfig("uci_har", structure="channels")


def test_every_pruned_method_policy_takes_the_structure(har_cnn):
    graph = _graph(har_cnn)
    rule = S.StructuredMasks(graph)
    for config in (CAAFPConfig("uci_har"), EfficientFLConfig("uci_har")):
        assert with_structure(config.policy(), config.method, rule).structured is rule

    class OwnRule:
        pass

    with pytest.raises(ConfigError, match="OwnRule\\) prunes single weights only"):
        with_structure(OwnRule(), "mine", rule)


def test_the_prune_and_heal_policy_gives_whole_units(har_cnn):
    config = CAAFPConfig("uci_har", phases=(0, 0, 10), prune_frequency=2, structure="filters")
    graph = _graph(har_cnn)
    policy = with_structure(config.policy(), config.method, S.StructuredMasks(graph))
    assert isinstance(policy, PruneAndHeal)
    kernels = select(har_cnn.get_weights(), prunable_mask_flags(har_cnn))
    stats = {
        "w": kernels,
        "w2": [k * k for k in kernels],
        "grad_sign": _random(graph, 5),
        "grad": _random(graph, 6),
    }
    masks = policy.update(1, kernels, kernels, _ones(graph), stats)
    assert abs(S.unit_sparsity(graph, masks) - 0.7) <= 0.5 / graph.n_units
    again = S.weight_masks(graph, S.unit_masks(graph, masks))
    assert all(np.array_equal(a, b) for a, b in zip(masks, again))


def test_a_batch_norm_over_time_is_not_taken_for_a_per_channel_one():
    inputs = tf.keras.Input((16, 3))
    h = L.Conv1D(8, 3, padding="same", name="conv")(inputs)
    h = L.Flatten()(L.BatchNormalization(axis=1, name="bn_time")(h))
    model = tf.keras.Model(inputs, L.Dense(4, activation="softmax", name="out")(h))
    with pytest.raises(ConfigError, match=r"layer 'bn_time' \(BatchNormalization\) after 'conv'"):
        _graph(model)
