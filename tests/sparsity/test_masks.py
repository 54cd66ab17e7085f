import numpy as np
import pytest

from fedprune.sparsity import masks as M


def test_unit_ids_per_weight_and_blocks():
    ids, n = M.unit_ids((5, 2), 1)
    assert n == 10 and len(np.unique(ids)) == 10
    ids, n = M.unit_ids((5, 2), 2)  # fan_in 5 -> blocks {0,1},{2,3},{4} per column
    assert n == 6
    assert ids[:, 0].tolist() == [0, 0, 2, 2, 4] and ids[:, 1].tolist() == [1, 1, 3, 3, 5]
    ids, n = M.unit_ids((2, 3, 4), 3)  # Conv1D kernel: fan_in = 2*3 = 6 -> 2 blocks per unit
    assert n == 8 and ids.shape == (2, 3, 4)


def test_prune_lowest_and_regrow_largest_gradient():
    mask = [np.array([1, 1, 1, 1, 0, 0], np.float32)[:, None]]
    score = [np.array([0.5, 0.1, 0.9, 0.3, 0.0, 0.0])[:, None]]
    grad = [np.array([9.0, 9.0, 9.0, 9.0, 0.2, 0.7])[:, None]]
    new = M.prune_and_regrow(mask, score, grad, n_prune=2, n_grow=1)
    # pruned: indices 1 (0.1) and 3 (0.3); regrown: 5 (largest gradient among inactive)
    assert new[0][:, 0].tolist() == [1, 0, 1, 0, 0, 1]


def test_just_pruned_weights_are_not_regrown():
    mask = [np.ones((3, 1), np.float32)]
    new = M.prune_and_regrow(
        mask, [np.array([[0.1], [0.5], [0.9]])], [np.array([[100.0], [0], [0]])], 1, 1
    )
    assert new[0][:, 0].tolist() == [0, 1, 1]


def test_global_ranking_across_tensors():
    masks = [np.ones((2, 1), np.float32), np.ones((2, 1), np.float32)]
    scores = [np.array([[0.9], [0.8]]), np.array([[0.1], [0.2]])]
    new = M.prune_to(masks, scores, target=0.5)
    assert [m.ravel().tolist() for m in new] == [[1, 1], [0, 0]]


def test_blocks_move_whole_units_and_score_is_block_mean():
    mask = [np.ones((4, 2), np.float32)]
    score = np.array([[0.1, 0.9], [0.2, 0.9], [0.9, 0.05], [0.9, 0.05]])
    new = M.prune_to(mask, [score], target=0.5, block=2)
    # block means: col0 {0.15, 0.9}, col1 {0.9, 0.05} -> the two lowest blocks go
    assert new[0].tolist() == [[0, 1], [0, 1], [1, 0], [1, 0]]


def test_prune_to_reaches_target_and_sparsity():
    rng = np.random.default_rng(0)
    masks = [np.ones((50, 20), np.float32), np.ones((5, 9, 8), np.float32)]
    scores = [rng.random(m.shape) for m in masks]
    new = M.prune_to(masks, scores, target=0.7)
    assert M.sparsity(new) == pytest.approx(0.7, abs=1e-3)
    blocked = M.prune_to(masks, scores, target=0.7, block=16)
    assert M.sparsity(blocked) == pytest.approx(0.7, abs=0.01)


def test_masked_weights_are_zero():
    w = [np.arange(1, 7, dtype=np.float32).reshape(3, 2)]
    m = [np.array([[1, 0], [0, 1], [1, 1]], np.float32)]
    assert M.apply(w, m)[0].tolist() == [[1, 0], [0, 4], [5, 6]]
