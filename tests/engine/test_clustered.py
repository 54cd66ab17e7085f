"""All clusters in one TFF computation equal one call per cluster (fedprune.engine.clustered)."""

import numpy as np
import pytest
import tensorflow_federated as tff

from fedprune.data.registry import load_federated
from fedprune.engine.client_work import LocalTraining
from fedprune.engine.clustered import build_clustered_round, stack_clusters, unstack_cluster
from fedprune.engine.datasets import round_seed
from fedprune.engine.local_loop import client_tensors
from fedprune.engine.process import build_learning_process, with_client_work_state
from fedprune.engine.rounds import run_round
from fedprune.models.spec import ModelSpec

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("statistics", [False, True])
def test_one_computation_equals_a_call_per_cluster(tff_context, fixture_data_dir, statistics):
    data = load_federated("uci_har", seed=0, data_dir=fixture_data_dir, verbose=False)
    spec = ModelSpec(data.input_shape, data.num_classes, seed=0)
    training = LocalTraining(1, 1e-3, prox=1e-3, masked=True, statistics=statistics)
    init = [np.asarray(w) for w in spec.initial_weights().trainable]
    rng = np.random.default_rng(0)
    # three clusters: different models and masks; cluster 2 has no client this round
    models = [[w + 0.01 * k for w in init] for k in range(3)]
    masks = [[(rng.random(w.shape) < 0.7).astype(np.float32) for w in init] for _ in range(3)]
    models = [[w * m for w, m in zip(ws, ms)] for ws, ms in zip(models, masks)]
    anchor = [w - 0.02 for w in init]
    members = {0: [1, 3, 4], 1: [2, 6]}
    t, seed, batch = 3, 0, 4

    process = build_learning_process(spec, training)
    base = process.initialize()
    expected = {}
    for c, ids in members.items():
        start = process.set_model_weights(base, tff.learning.models.ModelWeights(models[c], []))
        start = with_client_work_state(start, mask=masks[c], anchor=anchor)
        output = run_round(process, start, [data.client(i) for i in ids], t, seed, batch)
        expected[c] = output

    clustered = build_clustered_round(spec, training, clusters=3)
    order = [(c, i) for c, ids in members.items() for i in ids]
    state = {"weights": stack_clusters(models), "masks": stack_clusters(masks), "anchor": anchor}
    datasets = [client_tensors(data.client(i), batch, round_seed(seed, t, i)) for _, i in order]
    got = clustered(state, [np.int32(c) for c, _ in order], datasets)

    for c in members:
        want = process.get_model_weights(expected[c].state).trainable
        for a, b in zip(unstack_cluster(got["weights"], c), want):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
        train = expected[c].metrics["client_work"]["train"]
        assert int(got["train"]["examples"][c]) == int(train["train_examples"])
        loss = got["train"]["loss_sum"][c] / got["train"]["examples"][c]
        assert loss == pytest.approx(float(train["train_loss"]), rel=1e-5)
        if statistics:
            for key in ("w", "w2", "grad_sign", "grad"):
                want_stats = expected[c].metrics["client_work"]["statistics"][key]
                for a, b in zip(got["statistics"][key], want_stats):
                    np.testing.assert_allclose(np.asarray(a)[c], b, rtol=0, atol=1e-6)
    for a, b in zip(unstack_cluster(got["weights"], 2), models[2]):
        np.testing.assert_array_equal(a, b)  # no client: unchanged
