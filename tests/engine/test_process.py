"""FedAvg as a TFF learning process: its round equals the data-size-weighted mean (Eq. 2/6)."""

import numpy as np
import pytest

from fedprune.data.registry import load_federated
from fedprune.engine.process import build_fedavg_process, weighted_cluster_average
from fedprune.engine.rounds import run_round
from fedprune.models.spec import ModelSpec

pytestmark = pytest.mark.slow


def test_round_is_weighted_mean_of_client_models(tff_context, fixture_data_dir):
    data = load_federated("uci_har", seed=0, data_dir=fixture_data_dir, verbose=False)
    clients = data.clients[:3]
    # unequal client sizes make the weighting matter
    clients = [
        clients[0],
        type(clients[1])(
            **{
                **clients[1].__dict__,
                "x_train": clients[1].x_train[:10],
                "y_train": clients[1].y_train[:10],
            }
        ),
        clients[2],
    ]
    spec = ModelSpec(data.input_shape, data.num_classes, seed=0)
    process = build_fedavg_process(spec, local_epochs=1)
    state = process.initialize()

    def trained(cs):
        out = run_round(process, state, cs, round_num=1, seed=0, batch_size=4)
        return [np.asarray(w) for w in process.get_model_weights(out.state).trainable], out

    singles = [trained([c])[0] for c in clients]
    together, out = trained(clients)
    n = np.array([c.num_train for c in clients], dtype=np.float64)
    for w, expected in zip(together, weighted_cluster_average(singles, n), strict=True):
        np.testing.assert_allclose(w, expected, atol=2e-6)
    assert int(out.metrics["client_work"]["train"]["train_examples"]) == n.sum()
    # and the round really trained: the model moved away from its initialization
    initial = spec.initial_weights().trainable
    assert not np.allclose(together[0], initial[0])


def test_weighted_cluster_average_by_hand():
    a = [np.array([1.0, 2.0]), np.array(3.0)]
    b = [np.array([4.0, 8.0]), np.array(0.0)]
    avg = weighted_cluster_average([a, b], [1, 2])  # weights 1/3, 2/3
    np.testing.assert_allclose(avg[0], [3.0, 6.0])
    np.testing.assert_allclose(avg[1], 1.0)
    with pytest.raises(ValueError, match="one positive size per client model"):
        weighted_cluster_average([a, b], [1, 0])
