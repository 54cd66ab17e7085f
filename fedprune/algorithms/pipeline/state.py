"""The pipeline's server state between rounds, and its checkpoint form.

In the style of fedjax's ``ServerState``: the global model w (Phase 1, and the proximal anchor
w^(T0) of Eq. 5 afterwards), each client's cluster, each cluster's model w_c and mask M_c
(Eq. 6-7), and the communication accounts (Eq. 13 and encoded payload). The checkpoint keys
are those fedprune has always written (``global``, ``assignment``, ``cluster{c}_w``,
``cluster{c}_m``; accounts as scalars), so older run directories resume.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from fedprune.algorithms.caafp.communication import CommAccounts

Weights = list[np.ndarray]


@dataclasses.dataclass
class PipelineState:
    global_w: Weights
    accounts: CommAccounts
    assignment: np.ndarray | None = None  # cluster of each client, in sorted client-id order
    cluster_w: dict[int, Weights] = dataclasses.field(default_factory=dict)
    cluster_m: dict[int, Weights] = dataclasses.field(default_factory=dict)

    def to_checkpoint(self) -> tuple[dict[str, Weights], dict[str, float]]:
        arrays: dict[str, Weights] = {"global": self.global_w}
        if self.assignment is not None:
            arrays["assignment"] = [self.assignment]
            for c in sorted(self.cluster_w):
                arrays[f"cluster{c}_w"] = self.cluster_w[c]
                arrays[f"cluster{c}_m"] = self.cluster_m[c]
        return arrays, self.accounts.scalars()

    @classmethod
    def from_checkpoint(
        cls,
        arrays: dict[str, Weights],
        scalars: dict[str, float],
        clusters: int,
        accounts: Callable[[dict[str, float]], CommAccounts],
    ) -> PipelineState:
        state = cls(arrays["global"], accounts(scalars))
        if "assignment" in arrays:
            state.assignment = arrays["assignment"][0]
            for c in range(clusters):
                state.cluster_w[c] = arrays[f"cluster{c}_w"]
                state.cluster_m[c] = arrays[f"cluster{c}_m"]
        return state

    def cluster_of(self, ids: list[int]) -> dict[int, int]:
        """Client id -> cluster (``ids`` in the order of :attr:`assignment`)."""
        assert self.assignment is not None
        return dict(zip(ids, self.assignment.tolist()))
