"""Communication accounting: Eq. 13 bytes, the encoded payload, and the two MB units."""

import pytest

from fedprune.algorithms.caafp.communication import CommAccounts, eq13_bytes, payload_bytes


def test_eq13_bytes_by_hand():
    # 1000 parameters at 25 % sparsity: 750 non-zero x 4 bytes
    assert eq13_bytes(1000, 0.25) == 3000.0
    with pytest.raises(ValueError, match="sparsity must be in"):
        eq13_bytes(1000, 1.5)


def test_payload_is_bitmask_plus_values_or_dense():
    # 100 params, 80 prunable, 20 active: 10 bytes of mask + 4 * 20 + 4 * 20 dense
    assert payload_bytes(100, 80, 20) == 10 + 80 + 80
    assert payload_bytes(100, 80, 80) == 400  # dense is smaller than mask + all values


def test_totals_in_decimal_mb_and_in_eq13_mebibytes():
    accounts = CommAccounts(n_params=1_000_000, n_prunable=800_000, n_units=800_000)
    # 2 transfers of a model with 200,000 non-kernel + 300,000 active kernel weights:
    # 2 x 500,000 x 4 = 4,000,000 bytes
    accounts.model(300_000, transfers=2)
    assert accounts.total_bytes("eq13") == 4_000_000
    assert accounts.total_mb("eq13") == pytest.approx(4.0)
    assert accounts.total_mib("eq13") == pytest.approx(4_000_000 / 1_048_576)  # 3.8147
    assert accounts.total_mib("eq13") == pytest.approx(3.814697265625)
    # the two units differ by more than the 3 % a table comparison tolerates
    assert accounts.total_mb("eq13") / accounts.total_mib("eq13") == pytest.approx(1.048576)
    with pytest.raises(ValueError, match="kind must be"):
        accounts.total_mib("models")


def test_saved_totals_are_restored():
    accounts = CommAccounts(10, 8, 8, saved={"eq13_models": 1024.0**2, "payload_statistics": 5})
    assert accounts.total_mib("eq13") == 1.0
    assert accounts.total_bytes("payload") == 5


def test_label_histograms_cost_four_bytes_per_class_and_client():
    accounts = CommAccounts(10, 8, 8)
    accounts.values(30 * 6)  # 30 clients upload 6 class shares each
    assert accounts.eq13["clustering"] == accounts.payload["clustering"] == 30 * 6 * 4
    assert accounts.eq13["models"] == accounts.eq13["statistics"] == 0.0
