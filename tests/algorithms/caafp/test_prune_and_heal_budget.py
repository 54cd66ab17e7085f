"""CA-AFP's pruning budget (global as in Alg. 1, layerwise as our extension), without TFF."""

import numpy as np
import pytest

from fedprune.algorithms.caafp.prune_and_heal import PruneAndHeal
from fedprune.cli import build_parser
from fedprune.configs.pipeline import CAAFPConfig, EfficientFLConfig
from fedprune.errors import ConfigError
from fedprune.sparsity import masks as M

SHAPES = [(5, 9, 16), (5, 16, 32), (64, 6)]


def _round(policy, t, masks, rng):
    # kernel i's weights are 10**i times larger: a global ranking prunes the first kernel most
    weights = [rng.normal(size=s) * 10**i for i, s in enumerate(SHAPES)]
    stats = {
        "w": weights,
        "w2": [w * w for w in weights],
        "grad_sign": [np.sign(rng.normal(size=s)) for s in SHAPES],
        "grad": [rng.normal(size=s) for s in SHAPES],
    }
    return policy.update(t, weights, weights, masks, stats)


@pytest.mark.parametrize("block", [1, 16])
def test_layerwise_caafp_brings_every_kernel_to_the_schedule(block):
    config = CAAFPConfig(
        "uci_har",
        phases=(0, 0, 10),
        prune_frequency=5,
        start_sparsity=0.5,
        target_sparsity=0.7,
        churn=0.1,
        block=block,
        budget="layerwise",
    )
    policy, rng = PruneAndHeal.from_config(config), np.random.default_rng(0)
    masks = [np.ones(s, np.float32) for s in SHAPES]
    masks = _round(policy, 1, masks, rng)  # start pruning, every kernel to 50 %
    for m in masks:
        assert M.sparsity([m]) == pytest.approx(0.5, abs=block / m.size)
    before = [m.copy() for m in masks]
    masks = _round(policy, 5, masks, rng)  # R = 1: every kernel to 70 %, with churn
    for old, m in zip(before, masks):
        assert M.sparsity([m]) == pytest.approx(0.7, abs=block / m.size)
        assert np.any(m > old)  # churn regrew weights in every kernel


def test_global_caafp_reaches_target_overall_not_per_kernel():
    config = CAAFPConfig(
        "uci_har", phases=(0, 0, 10), prune_frequency=5, start_sparsity=0.5, churn=0.1
    )
    assert config.budget == "global"
    policy, rng = PruneAndHeal.from_config(config), np.random.default_rng(0)
    masks = _round(policy, 1, [np.ones(s, np.float32) for s in SHAPES], rng)
    masks = _round(policy, 5, masks, rng)
    assert M.sparsity(masks) == pytest.approx(0.7, abs=1e-3)
    # the small-magnitude kernel is pruned hardest, the large one least
    assert M.sparsity(masks[:1]) > 0.8 and M.sparsity(masks[2:]) < 0.6


def test_budget_is_validated_and_parsed():
    with pytest.raises(ConfigError, match="budget must be one of global, layerwise"):
        CAAFPConfig("uci_har", budget="per-layer")
    args = build_parser().parse_args(
        ["train", "caafp", "--dataset", "uci_har", "--out", "x", "--budget", "layerwise"]
    )
    assert args.budget == "layerwise"
    args = build_parser().parse_args(["train", "caafp", "--dataset", "uci_har", "--out", "x"])
    assert args.budget is None  # the config's default (global) applies


def test_run_dirs_from_before_the_option_still_open(tmp_path):
    import dataclasses
    import json

    from fedprune.algorithms.pipeline import run_pipeline

    config = CAAFPConfig("uci_har")
    old = dataclasses.asdict(config)
    old.update(standardize=False)  # as written before --split existed (no split key)
    del old["split"], old["label_noise"], old["classes_per_client"]
    del old["budget"]  # config.json written before --budget existed
    (tmp_path / "config.json").write_text(json.dumps(old))
    (tmp_path / "summary.json").write_text(json.dumps({"method": "caafp"}))
    assert run_pipeline(config, PruneAndHeal.from_config(config), tmp_path) == {"method": "caafp"}
    layerwise = dataclasses.replace(config, budget="layerwise")
    with pytest.raises(ConfigError, match="differs in: budget"):
        run_pipeline(layerwise, PruneAndHeal.from_config(layerwise), tmp_path)


# --- --prune-layers: which kernels are pruned ------------------------------------------------


def test_only_chosen_kernels_are_pruned_hand_checkable():
    from fedprune.algorithms.efficientfl import magnitude_scores
    from fedprune.algorithms.oneshot import PruneOnce
    from fedprune.algorithms.pipeline import update_masks

    config = EfficientFLConfig("uci_har", target_sparsity=0.5, prune_layers=("dense",))
    # trainable weights of a two-layer model: kernel, bias, kernel, bias; the second is chosen
    w = [
        np.array([[0.01, 0.02], [0.03, 0.04]]),  # tiny, but not chosen: stays dense
        np.array([0.0, 1.0]),
        np.array([[1.0, -4.0], [3.0, -2.0]]),  # |w| ranks 1 < 2 < 3 < 4: 1 and 2 go
        np.array([5.0, 5.0]),
    ]
    masks = [np.ones_like(v, np.float32) for v in w]
    stats = {k: w for k in ("w", "w2", "grad_sign", "grad")}
    scope = [False, False, True, False]
    new = update_masks(
        PruneOnce(magnitude_scores, config.target_sparsity), 1, w, w, masks, stats, scope
    )
    assert [m.tolist() for m in new] == [
        [[1, 1], [1, 1]],
        [1, 1],
        [[0, 1], [1, 0]],
        [1, 1],
    ]


def test_caafp_target_is_over_the_chosen_kernels():
    from fedprune.algorithms.pipeline import update_masks

    config = CAAFPConfig(
        "uci_har",
        phases=(0, 0, 10),
        prune_frequency=5,
        start_sparsity=0.5,
        target_sparsity=0.9,
        churn=0.1,
        block=16,
        prune_layers=("dense",),
    )
    policy, rng = PruneAndHeal.from_config(config), np.random.default_rng(0)
    shapes = [(5, 9, 16), (16,), (512, 32), (32,), (32, 6), (6,)]
    scope = [False, False, True, False, False, False]  # the (512, 32) kernel only
    masks = [np.ones(s, np.float32) for s in shapes]
    for t, target in ((1, 0.5), (5, 0.9)):  # start pruning, then R = 1: the target
        weights = [rng.normal(size=s) for s in shapes]
        stats = {
            "w": weights,
            "w2": [v * v for v in weights],
            "grad_sign": [np.sign(rng.normal(size=s)) for s in shapes],
            "grad": [rng.normal(size=s) for s in shapes],
        }
        masks = update_masks(policy, t, weights, weights, masks, stats, scope)
        assert M.sparsity([masks[2]]) == pytest.approx(target, abs=16 / masks[2].size)
        assert all(np.all(m == 1) for i, m in enumerate(masks) if i != 2)
    # over all kernels the sparsity is the chosen kernel's share of the target
    kernels = [masks[i] for i in (0, 2, 4)]
    share = masks[2].size / sum(k.size for k in kernels)
    assert M.sparsity(kernels) == pytest.approx(0.9 * share, abs=16 / masks[2].size)


def test_prune_layers_names_are_checked_parsed_and_ordered():
    from fedprune.models.cnn1d import build_har_cnn
    from fedprune.models.table import MODELS
    from fedprune.sparsity.layers import scope_flags

    valid = "the layers with prunable kernels are conv1, conv2, dense, probs"
    unknown = "unknown or missing layer name \\(fc, pool1\\)"
    with pytest.raises(ConfigError, match=f"{unknown}; {valid}"):
        CAAFPConfig("uci_har", prune_layers=("dense", "fc", "pool1"))
    with pytest.raises(ConfigError, match=valid):
        CAAFPConfig("uci_har", prune_layers=())
    args = build_parser().parse_args(
        ["train", "caafp", "--dataset", "uci_har", "--out", "x", "--prune-layers", "probs, dense"]
    )
    assert args.prune_layers == ("probs", "dense")
    config = CAAFPConfig("uci_har", prune_layers=args.prune_layers)
    assert config.prune_layers == ("dense", "probs")  # model order
    assert CAAFPConfig("uci_har").prune_layers is None  # default: all kernels
    model = build_har_cnn((128, 9))
    assert scope_flags(model, ("dense",)) == [False] * 4 + [True] + [False] * 3
    all_kernels = scope_flags(model, MODELS["har_cnn"].kernel_layers)
    assert scope_flags(model) == all_kernels == [True, False] * 4
    with pytest.raises(ConfigError, match="\\(drop1\\)"):
        scope_flags(model, ("drop1",))


def test_starves_units():
    # the 32 x 6 classifier has 2 blocks of 16 per class: 30 % of 12 blocks < 6 classes
    assert M.starves_units((32, 6), 16, 0.7)
    assert not M.starves_units((32, 6), 16, 0.4)  # 7.2 blocks >= 6 classes
    assert not M.starves_units((32, 6), 1, 0.7)
    assert M.starves_units((5, 9, 64), 16, 0.7)  # 3 blocks per channel: 0.9 per channel
    assert not M.starves_units((5, 64, 64), 16, 0.7)
    assert not M.starves_units((2048, 32), 16, 0.95)


def test_layerwise_blocks_refused_before_the_run_dir_is_written(tmp_path, fixture_data_dir):
    from fedprune.algorithms.pipeline import run_pipeline

    config = CAAFPConfig("uci_har", block=16, budget="layerwise")
    with pytest.raises(
        ConfigError,
        match="output units of conv1, probs without any weight .*"
        "use --prune-layers conv2,dense, a smaller --block, or --budget global",
    ):
        run_pipeline(config, PruneAndHeal.from_config(config), tmp_path / "run", fixture_data_dir)
    assert not (tmp_path / "run" / "config.json").exists()


def test_run_dirs_from_before_prune_layers_still_open(tmp_path):
    import dataclasses
    import json

    from fedprune.algorithms.pipeline import run_pipeline

    config = CAAFPConfig("uci_har")
    old = dataclasses.asdict(config)
    old.update(standardize=False)  # as written before --split existed (no split key)
    del old["split"], old["label_noise"], old["classes_per_client"]
    del old["budget"], old["prune_layers"]  # config.json written before both options existed
    (tmp_path / "config.json").write_text(json.dumps(old))
    (tmp_path / "summary.json").write_text(json.dumps({"method": "caafp"}))
    assert run_pipeline(config, PruneAndHeal.from_config(config), tmp_path) == {"method": "caafp"}
    dense = dataclasses.replace(config, prune_layers=("dense",))
    with pytest.raises(ConfigError, match="differs in: prune_layers"):
        run_pipeline(dense, PruneAndHeal.from_config(dense), tmp_path)


@pytest.mark.parametrize("budget", ["global", "layerwise"])
def test_a_start_above_the_target_is_healed_to_the_target(budget):
    # the paper's Study A: start 0.9, target 0.7, T2 = 15, f = 5 (updates after 1, 5, 10)
    config = CAAFPConfig(
        "uci_har", phases=(0, 0, 15), start_sparsity=0.9, target_sparsity=0.7, budget=budget
    )
    policy, rng = PruneAndHeal.from_config(config), np.random.default_rng(0)
    masks = _round(policy, 1, [np.ones(s, np.float32) for s in SHAPES], rng)
    assert M.sparsity(masks) == pytest.approx(0.9, abs=1e-3)
    masks = _round(policy, 5, masks, rng)
    assert M.sparsity(masks) == pytest.approx(0.8, abs=1e-3)  # half-way, two steps left
    masks = _round(policy, 10, masks, rng)
    assert M.sparsity(masks) == pytest.approx(0.7, abs=1e-3)
