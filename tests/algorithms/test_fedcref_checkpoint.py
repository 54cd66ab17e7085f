"""FedCRef's checkpoint round trip, without training (fast)."""

import numpy as np
import pytest

from fedprune.algorithms.fedcref.algorithm import FedCRefState
from fedprune.errors import DataError
from fedprune.runs import RunDir


def _save_and_load(tmp_path, state: FedCRefState) -> FedCRefState:
    """Through the run directory's checkpoint file, as the round loop saves and restores."""
    run = RunDir(tmp_path / "run", {"method": "fedcref"})
    arrays, scalars = state.to_checkpoint()
    run.save_checkpoint(state.iteration, arrays, {"wall_s": 1.0, **scalars})
    done, arrays, _ = run.load_checkpoint()
    return FedCRefState.from_checkpoint(done, arrays, str(run.path / "checkpoint.npz"))


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
    state = _state(per_model)
    loaded = _save_and_load(tmp_path, state)
    assert loaded.iteration == 2 and loaded.stop_history == state.stop_history
    assert not loaded.done and loaded.stop_reason == ""
    assert all(np.array_equal(a, b) for a, b in zip(loaded.assignments, state.assignments))
    assert loaded.active.tolist() == [True, False]
    assert sorted(loaded.models) == sorted(state.models)
    for key, weights in state.models.items():
        assert all(np.array_equal(a, b) for a, b in zip(loaded.models[key], weights))
    assert len(loaded.community_models) == 2
    assert all(len(m) == per_model for m in loaded.community_models)


def test_inconsistent_checkpoint_is_one_clear_error(tmp_path):
    state = _state(4)
    state.community_models.append(state.community_models[0][:3])  # a truncated model
    with pytest.raises(DataError, match="checkpoint.npz is inconsistent; delete it"):
        _save_and_load(tmp_path, state)


def test_the_stop_decision_survives_the_checkpoint(tmp_path):
    state = _state(4)
    state.done, state.stop_reason = True, "no active clients"
    loaded = _save_and_load(tmp_path, state)
    assert loaded.done and loaded.stop_reason == "no active clients"
