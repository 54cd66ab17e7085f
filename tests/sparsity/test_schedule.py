import pytest

from fedprune.errors import ConfigError
from fedprune.sparsity.schedule import PruneHealSchedule


def test_hand_computed_first_step():
    # T3 = 50, f = 5, t = 5: R = 9; dense model of 1000 weights; target 0.7
    s = PruneHealSchedule(rounds=50, frequency=5, target_sparsity=0.7, churn=0.05)
    step = s.step(5, n_total=1000, n_active=1000)
    assert step.steps_left == 9
    assert step.delta_sparsity == pytest.approx(0.7 / 9)
    assert (step.n_churn, step.n_deficit) == (50, 78)  # 0.05*1000; round(77.8)
    assert (step.n_prune, step.n_grow) == (128, 50)


def test_sparsity_reaches_target_at_last_step():
    s = PruneHealSchedule(rounds=50, frequency=5, target_sparsity=0.7, churn=0.05)
    total, active = 10_000, 10_000
    for t in range(1, 51):
        if s.prunes_at(t):
            step = s.step(t, total, active)
            active += step.n_grow - step.n_prune
    assert active == 3000


def test_last_step_has_r_zero_and_closes_the_gap():
    s = PruneHealSchedule(rounds=10, frequency=5, target_sparsity=0.5, churn=0.0)
    step = s.step(10, n_total=100, n_active=80)  # R = floor(0/5) = 0 -> 1
    assert step.steps_left == 1 and (step.n_prune, step.n_grow) == (30, 0)


def test_at_target_only_churn():
    s = PruneHealSchedule(
        rounds=20, frequency=5, target_sparsity=0.7, churn=0.05, start_sparsity=0.7
    )
    step = s.step(5, n_total=1000, n_active=300)
    assert (step.n_deficit, step.n_prune, step.n_grow) == (0, 15, 15)


def test_above_target_grows_back():
    s = PruneHealSchedule(rounds=10, frequency=5, target_sparsity=0.5, churn=0.1)
    step = s.step(10, n_total=100, n_active=40)
    assert (step.n_prune, step.n_grow) == (4, 14)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(rounds=0, frequency=1), "T3"),
        (dict(rounds=10, frequency=11), "frequency"),
        (dict(rounds=10, frequency=5, target_sparsity=1.0), "target sparsity"),
        (dict(rounds=10, frequency=5, start_sparsity=1.0), "start sparsity"),
        (dict(rounds=10, frequency=5, churn=-0.1), "churn"),
    ],
)
def test_impossible_parameters(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        PruneHealSchedule(**kwargs)


def test_a_start_above_the_target_heals_back_to_it_by_the_last_update():
    # Study A of the paper: start 0.9, target 0.7; T3 = 15, f = 5: updates at t = 5 and 10
    schedule = PruneHealSchedule(rounds=15, frequency=5, target_sparsity=0.7, start_sparsity=0.9)
    n_total, active = 1000, 100
    for t in (5, 10):
        step = schedule.step(t, n_total, active)
        assert step.n_deficit < 0 and step.n_grow > step.n_prune  # regrows the surplus
        active += step.n_grow - step.n_prune
    assert active == 300  # 0.8 after t = 5 (two steps left), 0.7 after t = 10
