"""FedCRef's checkpoint round trip, without training (fast)."""

import numpy as np
import pytest

from fedprune.algorithms.fedcref.algorithm import FedCRefState
from fedprune.algorithms.fedcref.experiment import _load_state, _save_state
from fedprune.errors import DataError
from fedprune.runs import RunDir


def _state(per_model: int) -> FedCRefState:
    rng = np.random.default_rng(0)
    model = lambda: [rng.normal(size=(3, 2)).astype(np.float32) for _ in range(per_model)]  # noqa: E731
    return FedCRefState(
        iteration=2,
        assignments=[np.array([0, 1, 1]), np.array([0, 0, 1])],
        active=np.array([True, False]),
        models={(0, 0): model(), (0, 1): model(), (1, 0): model(), (1, 1): model()},
        stop_history=[(3, 10), (4, 9)],
        community_models=[model(), model()],
    )


@pytest.mark.parametrize("per_model", [12, 4])  # the paper's autoencoder, and a smaller one
def test_state_round_trip(tmp_path, per_model):
    run = RunDir(tmp_path / "run", {"method": "fedcref"})
    state = _state(per_model)
    _save_state(run, state)
    loaded = _load_state(run)
    assert loaded.iteration == 2 and loaded.stop_history == state.stop_history
    assert sorted(loaded.models) == sorted(state.models)
    for key, weights in state.models.items():
        assert all(np.array_equal(a, b) for a, b in zip(loaded.models[key], weights))
    assert len(loaded.community_models) == 2
    assert all(len(m) == per_model for m in loaded.community_models)


def test_inconsistent_checkpoint_is_one_clear_error(tmp_path):
    run = RunDir(tmp_path / "run", {"method": "fedcref"})
    state = _state(4)
    state.community_models.append(state.community_models[0][:3])  # a truncated model
    _save_state(run, state)
    with pytest.raises(DataError, match="inconsistent; delete it"):
        _load_state(run)
