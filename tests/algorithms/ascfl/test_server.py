"""How AS-CFL's rule wires its options into the regrouping (ascfl/rules.py, ascfl/server.py)."""

import numpy as np

from fedprune.algorithms.ascfl import server
from fedprune.algorithms.ascfl.compose import RoundUpdates
from fedprune.algorithms.ascfl.rules import ASCFLRule, local_epochs, rule_of
from fedprune.configs.ascfl import ALGORITHM_1_LITERAL, CFLConfig, ClusteredImageConfig, IFCAConfig
from fedprune.engine.per_client import ClientUpdates
from fedprune.models.spec import ModelSpec

# The default image model on MNIST's shape (image_cnn_small: conv1, conv2, dense, probs).
SPEC = ModelSpec((28, 28, 1), 10, seed=0, model="image_cnn_small")
# Algorithm 1 read literally, regrouping from round 1 (no warm-up)
LITERAL = {**ALGORITHM_1_LITERAL, "warmup_rounds": 0}
# Similarity only, without the low rank: a constant proxy accuracy and a zero absolute gain
# admit every candidate, as the w/o-incentive ablation does
SIMILARITY_ONLY = {**LITERAL, "without": "low-rank", "admission": "absolute_gain", "gain": 0.0}

# Two update directions; norms 1, 10, 10 along x and 1, 1, 10 along y. The incentive (here
# similarity only) groups by direction: {0, 1, 2} and {3, 4, 5}. Raw Euclidean EM then sees
# centres (7, 0) and (0, 4): client 0 at (1, 0) is nearer (0, 4) (4.12 < 6) and moves.
UPDATES = [
    [np.array(v, dtype=np.float32)] for v in ([1, 0], [10, 0], [10, 0], [0, 1], [0, 1], [0, 10])
]


def _updates(updates: list) -> ClientUpdates:
    n = len(updates)
    return ClientUpdates(list(range(n)), updates, np.full(n, 100), np.zeros(n), np.zeros(n))


def _rule(**options: object) -> ASCFLRule:
    """AS-CFL's rule on a toy model whose low-rank step sees its last two tensors."""
    return ASCFLRule(ClusteredImageConfig(**options), SPEC, low_rank_tensors=2)


def _regroup(updates: list, **options: object) -> list[int]:
    """One regroup of ``updates`` (one client each, all from cluster 0) by similarity only;
    returns each client's new cluster."""
    n = len(updates)
    out = _rule(**{**SIMILARITY_ONLY, **options}).regroup(
        RoundUpdates(
            1,
            [[np.zeros(2, dtype=np.float32)]],
            dict.fromkeys(range(n), 0),
            _updates(updates),
            evaluate=lambda weights: 0.0,
            rng=np.random.default_rng(0),
            previous_splits=(),
        )
    )
    return [out.cluster_of[c] for c in range(n)]


def test_em_on_unit_vectors_keeps_the_direction_groups_raw_em_moves_a_small_update():
    unit = _regroup(UPDATES, em_space="unit")
    assert unit[:3] == [unit[0]] * 3 and unit[3:] == [unit[3]] * 3 and unit[0] != unit[3]
    raw = _regroup(UPDATES, em_space="raw")
    assert raw[0] == raw[3] and raw[0] != raw[1]


def test_options_are_recorded_only_where_they_differ_from_their_first_defaults():
    default = ClusteredImageConfig(**ALGORITHM_1_LITERAL)  # the defaults the options were added to
    changed = ClusteredImageConfig(
        em_space="unit",
        singletons="merge",
        split_guard="halves",
        update_reference="common",
        stage1="first_round",
        merge_guard="compact",
    )
    assert rule_of(changed, SPEC).config is changed  # the rule reads its configuration
    assert "merge_guard" not in default.recorded()
    assert changed.recorded()["stage1"] == "first_round" and "stage1" not in default.recorded()
    assert "update_reference" not in default.recorded()
    assert "split_guard" not in default.recorded()
    assert changed.recorded()["split_guard"] == "halves"
    recorded = default.recorded()  # run directories from before the options resume
    assert "em_space" not in recorded and "singletons" not in recorded
    assert changed.recorded()["em_space"] == "unit"
    assert changed.recorded()["singletons"] == "merge"


# A singleton next to a compact pair: G = 0 < merge threshold. Kept apart by default, merged
# (with its nearest cluster) under singletons="merge".
SINGLETON = [[np.array(v, dtype=np.float32)] for v in ([1, 0], [1, 0.1], [0, 1], [0.1, 1], [1, 1])]


def test_singletons_option_reaches_split_merge():
    clusters = {
        policy: len(set(_regroup(SINGLETON, em_space="unit", singletons=policy)))
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
    got = _updates(updates)
    models = [[np.zeros(2, dtype=np.float32)], [np.array([10.0, 0.0], dtype=np.float32)]]
    model_of = {c: int(c >= 3) for c in range(n)}

    def regroup(reference: str) -> list[int]:
        rule = _rule(**{**SIMILARITY_ONLY, "em_space": "unit", "update_reference": reference})
        out = rule.regroup(
            RoundUpdates(1, models, model_of, got, lambda w: 0.0, np.random.default_rng(0), ())
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
    got = _updates(updates)
    models = [[np.zeros(2, dtype=np.float32)], [np.ones(2, dtype=np.float32)]]
    model_of = {0: 0, 1: 0, 2: 0, 3: 1, 4: 1, 5: 1, 6: 1}

    def regroup(stage1: str, t: int) -> tuple[list[int], int]:
        calls = []

        def evaluate(weights):
            calls.append(1)
            return 0.5

        rule = _rule(**{**LITERAL, "without": "low-rank", "em_space": "unit", "stage1": stage1})
        out = rule.regroup(
            RoundUpdates(t, models, model_of, got, evaluate, np.random.default_rng(0), ())
        )
        return [out.cluster_of[c] for c in range(n)], len(calls)

    labels, evaluations = regroup("first_round", t=2)
    assert evaluations == 0
    assert labels[:3] == [labels[0]] * 3 and labels[3:6] == [labels[3]] * 3
    assert labels[6] == labels[0] != labels[3]
    for stage1, t in (("first_round", 1), ("every_round", 2)):
        assert regroup(stage1, t)[1] > 0


def test_the_warmup_averages_one_model_then_stage1_forms_the_clusters():
    got = _updates(UPDATES)
    models = [[np.zeros(2, dtype=np.float32)]]
    rule = _rule(**{**SIMILARITY_ONLY, "warmup_rounds": 2, "em_space": "unit"})

    def regroup(t: int):
        return rule.regroup(
            RoundUpdates(
                t,
                models,
                dict.fromkeys(range(6), 0),
                got,
                lambda w: 0.0,
                np.random.default_rng(0),
                (),
            )
        )

    warm = regroup(2)
    assert set(warm.cluster_of.values()) == {0} and warm.incentive_clusters is None
    np.testing.assert_allclose(warm.models[0][0], np.mean([u[0] for u in UPDATES], axis=0))
    assert regroup(3).incentive_clusters == 2  # Stage 1 in the first round after it


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
    models = [[np.zeros(4, np.float32), np.zeros((4, 3), np.float32), np.zeros(3, np.float32)]]
    rule = _rule(**LITERAL, without="incentive")
    out = rule.regroup(
        RoundUpdates(
            1,
            models,
            dict.fromkeys(range(6), 0),
            _updates(updates),
            lambda w: 0.0,
            np.random.default_rng(0),
            (),
        )
    )
    assert out.rank == 3


def test_local_epochs_rule_of_section_3_2_3():
    config = ClusteredImageConfig(local_epochs=2, batch_size=32)
    # ceil(32 / n): 5 examples -> 7 epochs, 10 -> 4, 31 -> 2 (= E), a batch or more -> E
    assert [local_epochs(config, n) for n in (5, 10, 31, 32, 500)] == [7, 4, 2, 2, 2]
    assert ASCFLRule(config, SPEC).epochs([5, 500]) == [7, 2]
    assert ASCFLRule(ClusteredImageConfig(epochs_rule="uniform"), SPEC).epochs([5]) is None
    assert "epochs_rule" not in config.recorded()
    assert ClusteredImageConfig(epochs_rule="uniform").recorded()["epochs_rule"] == "uniform"


def test_low_rank_layers_pick_the_output_layer_or_the_dense_head():
    output = ClusteredImageConfig(low_rank_layers="output")
    head = ClusteredImageConfig()
    # image_cnn_small: conv1, conv2, dense (24), probs (10): kernel and bias each
    assert rule_of(output, SPEC).low_rank_tensors == 2
    assert rule_of(head, SPEC).low_rank_tensors == 4
    # the count follows the run's model: the paper-size CNN's head is the same two Dense layers
    big = ModelSpec((32, 32, 3), 62, seed=0, model="image_cnn")
    assert rule_of(head, big).low_rank_tensors == 4
    assert "low_rank_layers" not in output.recorded()
    assert head.recorded()["low_rank_layers"] == "dense_head"


def test_the_similarity_space_factorizes_the_trailing_tensors_it_is_given():
    rng = np.random.default_rng(3)
    updates = [[rng.normal(size=s).astype(np.float32) for s in (5, 4, 3, 2)] for _ in range(6)]
    for tensors in (2, 4):
        _, sim, coefficients = server.similarity_space(updates, range(6), tensors, 0.999)
        x = np.stack([np.concatenate([u.ravel() for u in up[-tensors:]]) for up in updates])
        x = x.astype(np.float64)
        _, s, vt = np.linalg.svd(x, full_matrices=False)
        r = int(np.argmax(np.cumsum(s**2) / np.sum(s**2) >= 0.999)) + 1
        z = x @ vt[:r].T
        z /= np.linalg.norm(z, axis=1, keepdims=True)
        np.testing.assert_allclose(sim, z @ z.T, atol=1e-9)
        assert coefficients.shape == (6, r)


def test_the_baselines_record_the_options_they_do_not_use_at_one_fixed_value():
    """So their run directories from before AS-CFL's defaults changed still resume, and an
    AS-CFL option given to CFL does not make another run."""
    cfl = CFLConfig().recorded()
    assert cfl == CFLConfig(admission="similarity_gate", warmup_rounds=2).recorded()
    assert cfl["admission"] == "absolute_gain" and "warmup_rounds" not in cfl
    assert "stage1" not in IFCAConfig(clusters=1).recorded()
    assert ClusteredImageConfig().recorded()["stage1"] == "first_round"
