import numpy as np
import pytest

from fedprune.models.cnn1d import build_har_cnn


@pytest.mark.parametrize("shape, params", [((128, 9), 89_254), ((200, 3), 124_198)])
def test_paper_parameter_counts(shape, params):
    assert build_har_cnn(shape, 6).count_params() == params


def test_seed_fixes_initial_weights():
    a = build_har_cnn((128, 9), seed=3).get_weights()
    b = build_har_cnn((128, 9), seed=3).get_weights()
    c = build_har_cnn((128, 9), seed=4).get_weights()
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    assert not np.array_equal(a[0], c[0])
