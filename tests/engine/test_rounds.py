import pytest

from fedprune.engine.rounds import sample_clients
from fedprune.errors import ConfigError


def test_sampling_is_a_function_of_seed_and_round():
    ids = list(range(1, 31))
    a = sample_clients(ids, 10, seed=0, round_num=4)
    assert a == sample_clients(ids, 10, seed=0, round_num=4)
    assert len(set(a)) == 10 and set(a) <= set(ids)
    assert a != sample_clients(ids, 10, seed=0, round_num=5)
    assert sample_clients(ids, 40, seed=0, round_num=1) == ids


def test_bad_count():
    with pytest.raises(ConfigError):
        sample_clients([1, 2], 0, 0, 1)
