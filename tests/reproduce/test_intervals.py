"""Confidence intervals over seeds and the verdict against a paper's interval."""

import pytest

from fedprune.reproduce.intervals import against, mean_ci


def test_student_t_half_width_by_hand():
    # n = 5, s = sqrt(2.5) = 1.5811, sem = 0.70711, t(0.975, 4) = 2.77645
    mean, half = mean_ci([1.0, 2.0, 3.0, 4.0, 5.0])
    assert mean == 3.0 and half == pytest.approx(2.77645 * 0.70711, rel=1e-4)
    # n = 2: t(0.975, 1) = 12.7062, sem = 0.01
    assert mean_ci([0.88, 0.86])[1] == pytest.approx(0.127062, rel=1e-4)


def test_one_value_has_no_interval_and_none_is_refused():
    assert mean_ci([0.7]) == (0.7, None)
    with pytest.raises(ValueError, match="no values"):
        mean_ci([])


@pytest.mark.parametrize(
    ("mean", "half", "verdict"),
    [
        (0.88, 0.01, "in"),  # inside [0.851, 0.907]
        (0.851, None, "in"),  # on the paper's bound
        (0.84, 0.02, "overlap"),  # [0.82, 0.86] meets [0.851, 0.907]
        (0.84, None, "below"),  # one seed: a point outside
        (0.95, 0.03, "above"),  # [0.92, 0.98] is above 0.907
        (0.80, 0.04, "below"),  # [0.76, 0.84]
    ],
)
def test_where_a_mean_falls(mean, half, verdict):
    assert against(mean, half, 0.879, 0.028) == verdict
