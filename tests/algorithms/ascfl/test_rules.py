"""The rules of the clustered round (ascfl/rules.py): each method's configuration class gives
its rule, and each rule answers what the shared round asks of it."""

import numpy as np
import pytest

from fedprune.algorithms.ascfl.compose import MB, ClusterState, RoundUpdates
from fedprune.algorithms.ascfl.rules import (
    ASCFLRule,
    CFLFixedRule,
    CFLRule,
    FedAvgRule,
    IFCARule,
    rule_of,
)
from fedprune.configs.ascfl import CFLConfig, CFLFixedConfig, ClusteredImageConfig, IFCAConfig
from fedprune.engine.per_client import ClientUpdates
from fedprune.models.spec import ModelSpec

SPEC = ModelSpec((28, 28, 1), 10, seed=0, model="image_cnn_small")


def _updates(ids: list[int], updates: list) -> ClientUpdates:
    n = len(ids)
    return ClientUpdates(ids, updates, np.full(n, 10), np.zeros(n), np.zeros(n))


def _toy(values: list[float]) -> list[list[np.ndarray]]:
    return [[np.full(2, v, dtype=np.float32)] for v in values]


@pytest.mark.parametrize(
    "config, rule",
    [
        (ClusteredImageConfig(), ASCFLRule),
        (CFLConfig(), CFLRule),
        (CFLFixedConfig(clusters=2), CFLFixedRule),
        (IFCAConfig(clusters=2), IFCARule),
        (IFCAConfig(clusters=1), FedAvgRule),  # one model: nothing to choose
    ],
)
def test_each_configuration_class_gives_its_methods_rule(config, rule):
    built = rule_of(config, SPEC)
    assert type(built) is rule and built.config is config and built.spec is SPEC


def test_how_many_models_a_rule_starts_with_and_holds():
    ifca = rule_of(IFCAConfig(clusters=3), SPEC)
    models = ifca.initial_models()
    assert len(models) == ifca.slots == 3 and ifca.uses_losses
    assert not ifca.absent_follow_renumbering  # the K models keep their places
    assert not np.array_equal(models[0][0], models[1][0])  # K seeds
    fedavg = rule_of(IFCAConfig(clusters=1), SPEC)
    assert len(fedavg.initial_models()) == 1 and fedavg.slots == 20
    assert not fedavg.uses_losses and fedavg.absent_follow_renumbering
    np.testing.assert_array_equal(
        fedavg.initial_models()[0][0], SPEC.initial_weights().trainable[0]
    )
    # AS-CFL asks for losses only where a late client joins by its loss
    assert not rule_of(ClusteredImageConfig(), SPEC).uses_losses
    assert rule_of(ClusteredImageConfig(client_dropout=0.2), SPEC).uses_losses
    follow = ClusteredImageConfig(client_dropout=0.2, late_clients="follow")
    assert not rule_of(follow, SPEC).uses_losses


def test_ifca_clients_train_the_lowest_loss_model_and_a_model_nobody_chose_stays():
    rule = IFCARule(IFCAConfig(num_clients=4, clusters=3), SPEC)
    state = ClusterState(_toy([0.0, 1.0, 2.0]), np.zeros(4, dtype=np.int64))
    ids = np.array([0, 2, 3])
    table = {0: [0.5, 0.1, 0.9], 2: [0.2, 0.3, 0.4], 3: [0.7, 0.6, 0.8]}
    choice = rule.choose(1, state, ids, lambda chosen: np.array([table[c] for c in chosen]))
    assert choice.cluster_of.tolist() == [1, 0, 0, 1]
    assert choice.received_every_model.tolist() == [0, 2, 3]  # every client received all K
    model_of = {int(i): int(choice.cluster_of[i]) for i in ids}
    got = _updates([0, 2, 3], _toy([1.0, 1.0, 1.0]))
    out = rule.regroup(
        RoundUpdates(1, state.models, model_of, got, lambda w: 0.0, np.random.default_rng(0), ())
    )
    assert out.cluster_of == {0: 1, 2: 0, 3: 1}  # indices kept, not renumbered
    assert [float(m[0][0]) for m in out.models] == [1.0, 2.0, 2.0]
    traffic = rule.traffic(3, 3, 3, None)
    assert traffic["downlink_mb"] == round(4 * rule.params * 9 / MB, 6)
    assert traffic["uplink_mb"] == round(4 * rule.params * 3 / MB, 6)
    assert traffic["uplink_lowrank_mb"] == ""


def test_fedavg_averages_one_model_and_the_clusters_of_cfl_fixed_are_numbered_anew():
    got = _updates([1, 2, 3], _toy([1.0, 2.0, 3.0]))
    models = _toy([0.0])
    out = FedAvgRule(IFCAConfig(num_clients=4, clusters=1), SPEC).regroup(
        RoundUpdates(
            1, models, dict.fromkeys([1, 2, 3], 0), got, lambda w: 0.0, np.random.default_rng(0), ()
        )
    )
    assert out.cluster_of == {1: 0, 2: 0, 3: 0}
    np.testing.assert_allclose(out.models[0][0], [2.0, 2.0])
    directions = [[np.array(v, dtype=np.float32)] for v in ([1, 0], [1, 0.1], [0, 1], [0.1, 1])]
    rule = CFLFixedRule(CFLFixedConfig(num_clients=4, clusters=2), SPEC)
    out = rule.regroup(
        RoundUpdates(
            1,
            _toy([0.0, 5.0, 9.0]),
            {0: 2, 1: 2, 2: 1, 3: 1},
            _updates([0, 1, 2, 3], directions),
            lambda w: 0.0,
            np.random.default_rng(0),
            (),
        )
    )
    assert sorted(set(out.cluster_of.values())) == [0, 1]
    assert out.cluster_of[0] == out.cluster_of[1] != out.cluster_of[2] == out.cluster_of[3]


def test_ascfl_places_a_late_client_by_its_loss_and_counts_the_models_it_received():
    rule = ASCFLRule(
        ClusteredImageConfig(num_clients=4, client_dropout=0.25, warmup_rounds=1), SPEC
    )
    assert rule.late_after(1, np.array([0, 1, 2]), None) is None  # the warm-up forms nothing
    late = rule.late_after(2, np.array([0, 1, 2]), None)  # Stage 1 formed the clusters
    assert late.tolist() == [False, False, False, True]
    assert rule.late_after(3, np.array([1, 2, 3]), late) is late
    state = ClusterState(_toy([0.0, 1.0]), np.array([0, 0, 1, 0]), late=late)
    choice = rule.choose(3, state, np.array([1, 2, 3]), lambda chosen: np.array([[0.9, 0.1]]))
    assert choice.cluster_of.tolist() == [0, 0, 1, 1]
    assert choice.received_every_model.tolist() == [3]
    assert choice.late.tolist() == [False] * 4 and state.late[3]  # the state is not changed
    params = rule.params
    assert rule.traffic(3, 1, 2, None)["downlink_mb"] == round(4 * params * 4 / MB, 6)
