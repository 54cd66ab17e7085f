"""Counts: integers up to MAX_COUNT, and counts that cannot be met refused with the reachable
maximum instead of being clamped (cfl-fixed's clusters, Phase 2-3 sampling, --block).
Fast: configurations and a stand-in model only."""

from __future__ import annotations

import dataclasses

import pytest

from fedprune.checks import MAX_COUNT, check_count
from fedprune.configs.ascfl import CFLFixedConfig, ClusteredImageConfig, IFCAConfig
from fedprune.configs.fedavg import FedAvgConfig
from fedprune.configs.pipeline import CAAFPConfig
from fedprune.errors import ConfigError


def test_counts_stop_at_the_largest_32_bit_integer():
    assert MAX_COUNT == 2_147_483_647
    assert check_count("rounds", MAX_COUNT) == MAX_COUNT
    with pytest.raises(ConfigError) as err:
        check_count("rounds", MAX_COUNT + 1)
    assert str(err.value) == (
        "--rounds must be at most 2147483647 (the largest count fedprune takes), got 2147483648"
    )
    with pytest.raises(ConfigError, match="--rounds must be at most 2147483647"):
        FedAvgConfig("uci_har", rounds=10**20)
    with pytest.raises(ConfigError, match="--local-epochs must be at most 2147483647"):
        FedAvgConfig("uci_har", local_epochs=10**20)
    with pytest.raises(ConfigError, match=r"--phases T0,T1,T2 must add up to less than 2147483647"):
        CAAFPConfig("uci_har", phases=(10**20, 0, 0))


def test_cfl_fixed_clusters_at_most_the_clients_that_report():
    with pytest.raises(ConfigError) as err:
        CFLFixedConfig(clusters=1000)
    assert str(err.value) == (
        "--clusters must be at most 20 (the clients reporting in a round: --clients 20, "
        "--client-dropout 0), got 1000"
    )
    with pytest.raises(ConfigError, match=r"at most 10 \(.*--client-dropout 0.5\), got 11"):
        CFLFixedConfig(clusters=11, client_dropout=0.5)
    assert CFLFixedConfig(clusters=20).clusters == 20
    assert IFCAConfig(clusters=1).clusters == 1


def test_dropout_that_leaves_no_client_is_refused():
    with pytest.raises(ConfigError) as err:
        ClusteredImageConfig(num_clients=2, client_dropout=0.8)
    assert str(err.value) == (
        "--client-dropout 0.8 leaves none of the 2 clients (--clients) reporting in a round; "
        "give a smaller --client-dropout or more --clients"
    )
    assert ClusteredImageConfig(num_clients=2, client_dropout=0.7).reporting_clients == 1


def test_phase_2_3_rounds_need_a_client_per_cluster():
    with pytest.raises(ConfigError) as err:
        CAAFPConfig("uci_har", clusters=3, clients_per_round=2)
    assert str(err.value) == (
        "--clients-per-round 2 is below --clusters 3: every Phase 2-3 round trains at least one "
        "client per cluster; give --clients-per-round 3 or more, or fewer --clusters"
    )
    assert CAAFPConfig("uci_har", phases=(1, 0, 0), clusters=3, clients_per_round=2)


@dataclasses.dataclass
class _Weight:
    shape: tuple[int, ...]


@dataclasses.dataclass
class _Layer:
    name: str
    trainable_weights: list[_Weight]


class _Model:
    """What check_block reads of a Keras model: its layers' trainable weights."""

    def __init__(self, layers: dict[str, list[tuple[int, ...]]]):
        self.layers = [_Layer(n, [_Weight(s) for s in shapes]) for n, shapes in layers.items()]
        self.trainable_weights = [w for layer in self.layers for w in layer.trainable_weights]


def test_block_at_most_the_longest_kernel_column_pruned():
    from fedprune.algorithms.pipeline.scope import check_block

    model = _Model({"conv1": [(5, 3, 64), (64,)], "dense": [(3200, 32), (32,)]})
    scope = [True, False, True, False]
    check_block(model, scope, 3200)  # whole columns of dense, longer than conv1's 15
    with pytest.raises(ConfigError) as err:
        check_block(model, scope, 100000)
    assert str(err.value) == (
        "--block must be at most 3200 (the fan-in of dense, the longest kernel pruned), "
        "got 100000"
    )
    with pytest.raises(ConfigError, match=r"at most 15 \(the fan-in of conv1"):
        check_block(model, [True, False, False, False], 16)
