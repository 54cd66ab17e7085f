"""The shared parameter checks: values at and beyond every bound, and non-finite numbers."""

import math

import pytest

from fedprune.checks import (
    check_at_most,
    check_choice,
    check_count,
    check_finite,
    check_nonnegative,
    check_positive,
    check_range,
    check_seed,
    option,
)
from fedprune.errors import ConfigError


def test_option_spelling():
    assert option("learning_rate") == "--learning-rate"


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, "1", None, True])
def test_non_finite_or_non_numbers_are_refused(value):
    with pytest.raises(ConfigError, match="--lr must be a finite number"):
        check_finite("lr", value)
    with pytest.raises(ConfigError, match="--lr"):
        check_positive("lr", value)


def test_range_bounds_open_and_closed():
    assert check_range("churn", 0.0, 0, 1) == 0.0 and check_range("churn", 1.0, 0, 1) == 1.0
    with pytest.raises(ConfigError, match=r"--churn must be in \[0, 1\], got 1.5"):
        check_range("churn", 1.5, 0, 1)
    with pytest.raises(ConfigError, match=r"must be in \[0, 1\), got 1.0"):
        check_range("dirtiness", 1.0, 0, 1, high_open=True)
    with pytest.raises(ConfigError, match=r"--lr must be in \(0, inf\), got 0"):
        check_positive("lr", 0)
    assert check_nonnegative("prox", 0.0) == 0.0
    with pytest.raises(ConfigError, match=r"--prox must be in \[0, inf\)"):
        check_nonnegative("prox", -1e-9)


def test_counts_seeds_choices_and_data_bounds():
    assert check_count("ft_epochs", 0, minimum=0) == 0
    for bad in (0, 2.0, True):
        with pytest.raises(ConfigError, match="--rounds must be an integer >= 1"):
            check_count("rounds", bad)
    assert check_seed(0) == 0 and check_seed(2**31 - 1) == 2**31 - 1
    for bad in (-1, 2**31):
        with pytest.raises(ConfigError, match="--seed must be an integer in"):
            check_seed(bad)
    with pytest.raises(ConfigError, match="--budget must be one of global, layerwise"):
        check_choice("budget", "local", ("global", "layerwise"))
    assert check_at_most("clusters", 30, 30, "clients") == 30
    with pytest.raises(ConfigError, match=r"--clusters must be at most 30 \(clients\), got 40"):
        check_at_most("clusters", 40, 30, "clients")


def test_rules_check_and_describe_the_same_range():
    from fedprune.checks import (
        FRACTION,
        POSITIVE,
        SEED,
        check_fields,
        count,
        each,
        one_of,
        optional,
    )

    assert (FRACTION.text, POSITIVE.text, count(2).text) == ("[0, 1]", "(0, inf)", "integer >= 2")
    assert SEED.text == "integer in [0, 2147483647]"
    with pytest.raises(ConfigError, match=r"--churn must be in \[0, 1\], got 1.5"):
        FRACTION.check("churn", 1.5)
    assert optional(FRACTION).check("alpha", None) is None
    with pytest.raises(ConfigError, match=r"--alpha must be in \[0, 1\]"):
        optional(FRACTION).check("alpha", -0.1)
    assert each(count(0)).check("ft_epochs", (0, 3)) == (0, 3)
    with pytest.raises(ConfigError, match="--ft-epochs needs at least one value"):
        each(count(0)).check("ft_epochs", ())
    with pytest.raises(ConfigError, match="--ft-epochs must be an integer >= 0, got -1"):
        each(count(0)).check("ft_epochs", (3, -1))
    assert one_of(("a", "b")).choices == ("a", "b")
    # check_fields stops at the first failure, in the given order
    with pytest.raises(ConfigError, match="--rounds"):
        check_fields([("lr", 1e-3, POSITIVE), ("rounds", 0, count()), ("seed", -1, SEED)])
