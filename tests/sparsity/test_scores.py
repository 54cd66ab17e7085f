import numpy as np
import pytest

from fedprune.errors import ConfigError
from fedprune.sparsity import scores as S


def _clients():
    rng = np.random.default_rng(1)
    # three clients' locally trained weights of two tensors, and their gradients
    ws = [[rng.normal(size=(4, 3)), rng.normal(size=(5,))] for _ in range(3)]
    gs = [[rng.normal(size=(4, 3)), rng.normal(size=(5,))] for _ in range(3)]
    return ws, gs


def test_scores_equal_direct_per_client_computation():
    ws, gs = _clients()
    cluster = [np.mean([w[i] for w in ws], axis=0) for i in range(2)]
    mean_w = [np.mean([w[i] for w in ws], axis=0) for i in range(2)]
    mean_w2 = [np.mean([w[i] ** 2 for w in ws], axis=0) for i in range(2)]
    mean_sign = [np.mean([np.sign(g[i]) for g in gs], axis=0) for i in range(2)]

    top = max(np.abs(c).max() for c in cluster)
    for i in range(2):
        var = np.var(np.stack([w[i] for w in ws]), axis=0)
        con = np.abs(np.mean(np.stack([np.sign(g[i]) for g in gs]), axis=0))
        np.testing.assert_allclose(S.magnitude(cluster)[i], np.abs(cluster[i]) / top)
        np.testing.assert_allclose(S.coherence(mean_w, mean_w2)[i], 1 / (1 + var), rtol=1e-10)
        np.testing.assert_allclose(S.consistency(mean_sign)[i], con)
        total = S.importance(cluster, mean_w, mean_w2, mean_sign, 0.5, 0.25, 0.25)[i]
        expected = 0.5 * np.abs(cluster[i]) / top + 0.25 / (1 + var) + 0.25 * con
        np.testing.assert_allclose(total, expected, rtol=1e-10)


def test_consistency_bounds():
    assert S.consistency([np.array([1.0, -1.0, 0.0, 1 / 3])])[0].tolist() == [1, 1, 0, 1 / 3]


@pytest.mark.parametrize("abg", [(0.5, 0.5, 0.5), (1.2, -0.1, -0.1), (0.2, 0.2, 0.2)])
def test_invalid_weights(abg):
    with pytest.raises(ConfigError):
        S.check_weights(*abg)
