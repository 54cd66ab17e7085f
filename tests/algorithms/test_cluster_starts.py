"""Phase 4's start models (Eq. 12): one masked copy per cluster, shared by its clients, so a run
of thousands of clients holds as many start models as it has clusters."""

from __future__ import annotations

import numpy as np

from fedprune.algorithms.pipeline.compose import cluster_starts


def test_clients_of_a_cluster_share_its_masked_start_and_masks():
    rng = np.random.default_rng(0)
    cluster_w = {c: [rng.normal(size=(3, 4)), rng.normal(size=4)] for c in (0, 1)}
    kernel_masks = {c: [(rng.random((3, 4)) > 0.5).astype(np.float32)] for c in (0, 1)}
    cluster_of = {10: 0, 11: 1, 12: 0, 13: 0}

    start, masks = cluster_starts(cluster_w, kernel_masks, cluster_of, [True, False])

    assert start[10] is start[12] is start[13] and masks[10] is masks[13]
    assert start[11] is not start[10]
    for client, c in cluster_of.items():  # w_c ⊙ M_c on the kernel, the bias untouched
        np.testing.assert_array_equal(start[client][0], cluster_w[c][0] * kernel_masks[c][0])
        np.testing.assert_array_equal(start[client][1], cluster_w[c][1])
        np.testing.assert_array_equal(masks[client][0], kernel_masks[c][0])
