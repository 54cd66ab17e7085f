"""A client's noised upload for the clustering (local differential privacy).

``--cluster-signal-noise Z --cluster-signal-clip C``: before a client's clustering signal
(its one-epoch update or its label histogram) leaves it, the client clips it to L2 norm ``C``
and adds ``N(0, (Z C)²)`` to every value: TFF's DP aggregator
(:func:`fedprune.privacy.dp_mean.dp_mean`) run on that one vector, i.e. with one record, as
the client's own randomizer. The server clusters the noised vectors only.

Guarantee and readings:

* **Local DP of each upload**, against the server and anyone who sees the upload, for any
  two values the client's data could give (replace-one adjacency of the whole upload): two
  clipped vectors differ by at most ``2C`` in L2, so one upload is a Gaussian mechanism with
  noise multiplier ``Z / 2`` relative to that sensitivity; ``passes`` uploads (the clustering
  step, then one per ``--recluster`` pass) compose. (ε, δ) come from the RDP accountant
  (:func:`fedprune.privacy.accounting.privacy_spent`). For label histograms the bound is
  loose: two histograms differ by at most √2 (they are non-negative and sum to 1), so the
  ε reported is an upper bound.
* **What it covers**: the clustering upload only. The model updates of the training rounds
  are not noised by this option (FedAvg's and the clusters' rounds are unchanged), so this
  is not a guarantee for the whole run.
* **Noise is not reproducible from the seed**: TF Privacy draws it unseeded (noise that could
  be regenerated from a known seed could be subtracted). With noise on, two runs of the same
  seed may choose different clusters; a resumed run keeps the clusters it chose.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fedprune import checks
from fedprune.privacy.accounting import privacy_spent

DELTA = 1e-5  # the δ at which the upload's ε is reported


@dataclasses.dataclass(frozen=True)
class UploadNoise:
    """The noise each client adds to its clustering upload."""

    noise_multiplier: float
    clip_norm: float

    def __post_init__(self) -> None:
        checks.check_positive("cluster_signal_noise", self.noise_multiplier)
        checks.check_positive("cluster_signal_clip", self.clip_norm)

    def apply(self, signals: np.ndarray) -> np.ndarray:
        """Every row of ``signals`` (one client's upload each) clipped and noised on its own
        through TFF's DP aggregator; float64, the shape of ``signals``."""
        from fedprune.privacy.dp_mean import dp_mean  # imports TFF

        rows = np.asarray(signals, dtype=np.float64)
        if rows.ndim != 2 or not np.all(np.isfinite(rows)):
            raise ValueError("clustering signals must be a finite (clients, values) matrix")
        return np.stack([dp_mean(row[None], self.clip_norm, self.noise_multiplier) for row in rows])

    def record(self, passes: int) -> dict:
        """What ``cluster_choice.json`` and ``summary.json`` say about the noise after
        ``passes`` uploads per client: the settings and each client's (ε, δ)."""
        spent = privacy_spent(self.noise_multiplier / 2.0, passes, DELTA)
        return {
            "noise_multiplier": self.noise_multiplier,
            "clip_norm": self.clip_norm,
            "uploads_per_client": passes,
            "epsilon": spent.epsilon,
            "delta": DELTA,
            "adjacency": "any two uploads of one client (L2 sensitivity 2 C)",
        }
