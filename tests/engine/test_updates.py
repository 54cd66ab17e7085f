"""The clustering pass's per-client updates: finite rows in client order, or one clear error."""

import numpy as np
import pytest

from fedprune.data.partition import ClientData
from fedprune.data.registry import load_federated
from fedprune.engine.rounds import TrainingDiverged
from fedprune.engine.updates import client_updates, one_epoch_updates
from fedprune.models.spec import ModelSpec


def _client(client_id: int) -> ClientData:
    x = np.zeros((4, 8, 3), np.float32)
    y = np.zeros(4, np.int64)
    return ClientData(client_id, x, y, x, y)


def test_a_non_finite_update_names_its_clients():
    clients = [_client(7), _client(3), _client(5)]
    rows = [[np.ones(2), np.ones(1)], [np.full(2, np.nan), np.ones(1)], [np.ones(2), [np.inf]]]
    with pytest.raises(TrainingDiverged, match=r"round 4: the clustering pass diverged .* 3, 5;"):
        client_updates(lambda weights, data: rows, None, clients, seed=0, batch_size=2, round_num=4)


def test_finite_updates_are_flattened_in_client_order():
    clients = [_client(7), _client(3)]
    rows = [[np.ones((2, 1)), np.zeros(1)], [np.full((2, 1), 2.0), np.ones(1)]]
    matrix = client_updates(lambda weights, data: rows, None, clients, seed=0, batch_size=2)
    np.testing.assert_array_equal(matrix, [[1, 1, 0], [2, 2, 1]])


@pytest.mark.slow
def test_a_diverging_start_is_refused_before_clustering(tff_context, fixture_data_dir):
    data = load_federated("uci_har", seed=0, data_dir=fixture_data_dir, verbose=False)
    spec = ModelSpec(data.input_shape, data.num_classes, seed=0)
    weights = [np.asarray(w) for w in spec.initial_weights().trainable]
    finite = one_epoch_updates(spec, weights, data.clients[:2], 1e-3, seed=0, batch_size=8)
    assert finite.shape == (2, sum(w.size for w in weights)) and np.isfinite(finite).all()
    weights[0] = np.full_like(weights[0], np.inf)
    ids = ", ".join(str(c.client_id) for c in sorted(data.clients[:2], key=lambda c: c.client_id))
    with pytest.raises(TrainingDiverged, match=f"non-finite update\\) on clients {ids};"):
        one_epoch_updates(spec, weights, data.clients[:2], 1e-3, seed=0, batch_size=8)
