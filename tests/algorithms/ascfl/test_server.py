"""How the AS-CFL server wires its options into the regrouping (ascfl/server.py)."""

import numpy as np

from fedprune.algorithms.ascfl import server
from fedprune.algorithms.ascfl.experiment import local_epochs, settings_of
from fedprune.configs.ascfl import BEFORE_STOP_31, CFLConfig, ClusteredImageConfig, IFCAConfig
from fedprune.engine.per_client import ClientUpdates
from fedprune.models.spec import ModelSpec

# The default image model on MNIST's shape (image_cnn_small: conv1, conv2, dense, probs).
SPEC = ModelSpec((28, 28, 1), 10, seed=0, model="image_cnn_small")

# Two update directions; norms 1, 10, 10 along x and 1, 1, 10 along y. The incentive (here
# similarity only) groups by direction: {0, 1, 2} and {3, 4, 5}. Raw Euclidean EM then sees
# centres (7, 0) and (0, 4): client 0 at (1, 0) is nearer (0, 4) (4.12 < 6) and moves.
UPDATES = [
    [np.array(v, dtype=np.float32)] for v in ([1, 0], [10, 0], [10, 0], [0, 1], [0, 1], [0, 10])
]


def _regroup(updates: list, **settings: object) -> list[int]:
    """One regroup of ``updates`` (one client each, all from cluster 0), without the
    incentive or the low rank; returns each client's new cluster."""
    n = len(updates)
    got = ClientUpdates(list(range(n)), updates, np.full(n, 100), np.zeros(n), np.zeros(n))
    settings = server.ServerSettings(incentive=False, low_rank=False, **settings)
    out = server.regroup(
        [[np.zeros(2, dtype=np.float32)]],
        dict.fromkeys(range(n), 0),
        got,
        settings,
        evaluate=lambda weights: 0.0,
        rng=np.random.default_rng(0),
    )
    return [out.cluster_of[c] for c in range(n)]


def test_em_on_unit_vectors_keeps_the_direction_groups_raw_em_moves_a_small_update():
    unit = _regroup(UPDATES, unit_vectors=True)
    assert unit[:3] == [unit[0]] * 3 and unit[3:] == [unit[3]] * 3 and unit[0] != unit[3]
    raw = _regroup(UPDATES, unit_vectors=False)
    assert raw[0] == raw[3] and raw[0] != raw[1]


def test_em_space_and_singletons_reach_the_server_and_only_non_defaults_are_recorded():
    default = ClusteredImageConfig(**BEFORE_STOP_31)  # the defaults the options were added to
    changed = ClusteredImageConfig(
        em_space="unit",
        singletons="merge",
        split_guard="halves",
        update_reference="common",
        stage1="first_round",
        merge_guard="compact",
    )
    before, now = settings_of(default, SPEC), settings_of(changed, SPEC)
    assert now.merge_guard == "compact" and "merge_guard" not in default.recorded()
    assert now.stage1 == "first_round"
    assert changed.recorded()["stage1"] == "first_round" and "stage1" not in default.recorded()
    assert now.update_reference == "common"
    assert "update_reference" not in default.recorded()
    assert (before.split_guard, now.split_guard) == ("none", "halves")
    assert "split_guard" not in default.recorded()
    assert changed.recorded()["split_guard"] == "halves"
    assert before.unit_vectors is False and now.unit_vectors
    assert (before.singletons, now.singletons) == ("keep", "merge")
    recorded = default.recorded()  # run directories from before the options resume
    assert "em_space" not in recorded and "singletons" not in recorded
    assert changed.recorded()["em_space"] == "unit"
    assert changed.recorded()["singletons"] == "merge"


# A singleton next to a compact pair: G = 0 < merge threshold. Kept apart by default, merged
# (with its nearest cluster) under singletons="merge".
SINGLETON = [[np.array(v, dtype=np.float32)] for v in ([1, 0], [1, 0.1], [0, 1], [0.1, 1], [1, 1])]


def test_singletons_option_reaches_split_merge():
    clusters = {
        policy: len(set(_regroup(SINGLETON, unit_vectors=True, singletons=policy)))
        for policy in ("keep", "merge")
    }
    assert clusters["merge"] < clusters["keep"]


def test_update_reference_common_compares_where_the_clients_ended():
    # Clients 0-2 trained from cluster 0's model (0, 0), clients 3-5 from cluster 1's (10, 0).
    # Their changes alternate between two directions, so from their own starts they pair up
    # across clusters ({0, 2, 4} and {1, 3, 5}); from the common mean model (5, 0) each
    # client sits at -5 or +5 plus its small change, so the clusters it trained in remain.
    steps = ([1, 0.2], [0.2, 1]) * 3
    updates = [[np.array(v, dtype=np.float32)] for v in steps]
    n = len(updates)
    got = ClientUpdates(list(range(n)), updates, np.full(n, 100), np.zeros(n), np.zeros(n))
    models = [[np.zeros(2, dtype=np.float32)], [np.array([10.0, 0.0], dtype=np.float32)]]
    cluster_of = {c: int(c >= 3) for c in range(n)}

    def regroup(reference: str) -> list[int]:
        settings = server.ServerSettings(
            incentive=False, low_rank=False, unit_vectors=True, update_reference=reference
        )
        out = server.regroup(
            models, cluster_of, got, settings, lambda w: 0.0, np.random.default_rng(0)
        )
        return [out.cluster_of[c] for c in range(n)]

    start = regroup("start")
    assert start[0] == start[2] == start[4] != start[1] == start[3] == start[5]
    common = regroup("common")
    assert common[0] == common[1] == common[2] != common[3] == common[4] == common[5]


def test_stage1_first_round_forms_clusters_once_then_stage2_refines_them():
    # Clients 0-2 and 3-5 point two ways; client 6 points like 0-2 but trained in cluster 1.
    # Under stage1="first_round", after round 1 no proxy evaluation runs (no incentive) and
    # EM starts from the clusters the clients trained in: client 6 moves to 0-2's cluster and
    # the two clusters stay. In round 1, or every round by default, the incentive runs.
    steps = ([1, 0.1], [1, 0], [1, -0.1], [0.1, 1], [0, 1], [-0.1, 1], [1, 0.05])
    updates = [[np.array(v, dtype=np.float32)] for v in steps]
    n = len(updates)
    got = ClientUpdates(list(range(n)), updates, np.full(n, 100), np.zeros(n), np.zeros(n))
    models = [[np.zeros(2, dtype=np.float32)], [np.ones(2, dtype=np.float32)]]
    cluster_of = {0: 0, 1: 0, 2: 0, 3: 1, 4: 1, 5: 1, 6: 1}

    def regroup(stage1: str, first_round: bool) -> tuple[list[int], int]:
        calls = []

        def evaluate(weights):
            calls.append(1)
            return 0.5

        settings = server.ServerSettings(low_rank=False, unit_vectors=True, stage1=stage1)
        out = server.regroup(
            models,
            cluster_of,
            got,
            settings,
            evaluate,
            np.random.default_rng(0),
            first_round=first_round,
        )
        return [out.cluster_of[c] for c in range(n)], len(calls)

    labels, evaluations = regroup("first_round", first_round=False)
    assert evaluations == 0
    assert labels[:3] == [labels[0]] * 3 and labels[3:6] == [labels[3]] * 3
    assert labels[6] == labels[0] != labels[3]
    for stage1, first in (("first_round", True), ("every_round", False)):
        assert regroup(stage1, first)[1] > 0


def test_low_rank_similarity_sees_the_whole_output_layer():
    # Regression (32b387c passed flattened vectors where per-layer updates were expected, so
    # the low rank saw only the last two numbers of each update): an output kernel and bias
    # whose updates span three directions must give rank 3, not at most 2.
    rng = np.random.default_rng(0)
    basis = rng.normal(size=(3, 12))
    updates = [
        [
            np.zeros(4, dtype=np.float32),
            basis[i % 3].reshape(4, 3).astype(np.float32),
            np.zeros(3, dtype=np.float32),
        ]
        for i in range(6)
    ]
    got = ClientUpdates(list(range(6)), updates, np.full(6, 100), np.zeros(6), np.zeros(6))
    models = [[np.zeros(4, np.float32), np.zeros((4, 3), np.float32), np.zeros(3, np.float32)]]
    settings = server.ServerSettings(incentive=False, low_rank=True)
    out = server.regroup(
        models, dict.fromkeys(range(6), 0), got, settings, lambda w: 0.0, np.random.default_rng(0)
    )
    assert out.rank == 3


def test_local_epochs_rule_of_section_3_2_3():
    config = ClusteredImageConfig(local_epochs=2, batch_size=32)
    # ceil(32 / n): 5 examples -> 7 epochs, 10 -> 4, 31 -> 2 (= E), a batch or more -> E
    assert [local_epochs(config, n) for n in (5, 10, 31, 32, 500)] == [7, 4, 2, 2, 2]
    assert "epochs_rule" not in config.recorded()
    assert ClusteredImageConfig(epochs_rule="uniform").recorded()["epochs_rule"] == "uniform"


def test_low_rank_layers_pick_the_output_layer_or_the_dense_head():
    output = ClusteredImageConfig(low_rank_layers="output")
    head = ClusteredImageConfig()
    # image_cnn_small: conv1, conv2, dense (24), probs (10): kernel and bias each
    assert settings_of(output, SPEC).low_rank_tensors == 2
    assert settings_of(head, SPEC).low_rank_tensors == 4
    # the count follows the run's model: the paper-size CNN's head is the same two Dense layers
    big = ModelSpec((32, 32, 3), 62, seed=0, model="image_cnn")
    assert settings_of(head, big).low_rank_tensors == 4
    assert "low_rank_layers" not in output.recorded()
    assert head.recorded()["low_rank_layers"] == "dense_head"


def test_the_similarity_space_factorizes_the_trailing_tensors_it_is_given():
    rng = np.random.default_rng(3)
    updates = [[rng.normal(size=s).astype(np.float32) for s in (5, 4, 3, 2)] for _ in range(6)]
    for tensors in (2, 4):
        settings = server.ServerSettings(low_rank_tensors=tensors, explained_variance=0.999)
        _, sim, coefficients = server._similarity_space(updates, range(6), settings)
        x = np.stack([np.concatenate([u.ravel() for u in up[-tensors:]]) for up in updates])
        x = x.astype(np.float64)
        _, s, vt = np.linalg.svd(x, full_matrices=False)
        r = int(np.argmax(np.cumsum(s**2) / np.sum(s**2) >= 0.999)) + 1
        z = x @ vt[:r].T
        z /= np.linalg.norm(z, axis=1, keepdims=True)
        np.testing.assert_allclose(sim, z @ z.T, atol=1e-9)
        assert coefficients.shape == (6, r)


def test_the_baselines_record_the_options_they_do_not_use_at_one_fixed_value():
    """So their run directories from before stop 31's defaults still resume, and an AS-CFL
    option given to CFL does not make another run."""
    cfl = CFLConfig().recorded()
    assert cfl == CFLConfig(admission="similarity_gate", warmup_rounds=2).recorded()
    assert cfl["admission"] == "absolute_gain" and "warmup_rounds" not in cfl
    assert "stage1" not in IFCAConfig(clusters=1).recorded()
    assert ClusteredImageConfig().recorded()["stage1"] == "first_round"
