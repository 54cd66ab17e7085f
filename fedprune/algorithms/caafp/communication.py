"""Communication accounting: the paper's Eq. 13 and the bytes of an encoded sparse payload.

Eq. 13 counts every transfer (download and upload, per participating client) as the dense
parameter count x (1 - sparsity) x 4 bytes, i.e. 4 bytes per non-zero parameter.

Interpretation (the unit): Eq. 13 divides the bytes by 1024² and the paper calls the result
"MB"; that is a mebibyte (MiB). :meth:`CommAccounts.total_mb` divides by 10^6 (decimal MB,
what the summaries have always reported) and :meth:`CommAccounts.total_mib` by 1024², the
paper's unit. The same bytes read 4.9 % higher in MB than in MiB (1024² / 10^6 = 1.0486), so
compare with the paper's tables in MiB.

The payload is what a sparse model actually costs when encoded: a bitmask over the prunable
kernels (1 bit per mask unit: a weight, or a block of weights with ``--block``) plus 4-byte
values of the unmasked kernel weights, plus the dense never-pruned tensors (biases); a model
is sent dense when that is smaller. With ``--structure filters`` the mask is 1 bit per filter
or unit (:attr:`fedprune.sparsity.structured.UnitGraph.n_units`): a kernel's mask is the outer
product of its kept inputs and outputs (:mod:`fedprune.sparsity.structured`), so the receiver
rebuilds it from those bits, and the kernels whose outputs are never pruned (the classifier)
need none of their own.
"""

from __future__ import annotations


def eq13_bytes(n_params: int, sparsity: float) -> float:
    """Eq. 13 bytes of one transfer of a model with ``n_params`` parameters."""
    if not 0.0 <= sparsity <= 1.0:
        raise ValueError(f"sparsity must be in [0, 1], got {sparsity}")
    return n_params * (1.0 - sparsity) * 4.0


def payload_bytes(
    n_params: int, n_prunable: int, n_active_prunable: int, n_units: int | None = None
) -> int:
    """Bytes of one bitmask + values encoding (or dense, whichever is smaller).

    ``n_units`` is the number of mask units (default: one per prunable weight).
    """
    if not 0 <= n_active_prunable <= n_prunable <= n_params:
        raise ValueError("need 0 <= active <= prunable <= params")
    units = n_prunable if n_units is None else n_units
    dense = 4 * n_params
    sparse = -(-units // 8) + 4 * n_active_prunable + 4 * (n_params - n_prunable)
    return min(dense, sparse)


class CommAccounts:
    """Cumulative communication in bytes, by Eq. 13 and as encoded payload, per category:
    ``models`` (cluster/global model transfers), ``clustering`` (the one-epoch updates of
    Eq. 3 and the model they start from, or the label histograms of ``--cluster-signal
    labels``) and ``statistics`` (score statistics)."""

    CATEGORIES = ("models", "clustering", "statistics")

    def __init__(
        self,
        n_params: int,
        n_prunable: int,
        n_units: int,
        saved: dict[str, float] | None = None,
    ):
        self.n_params, self.n_prunable, self.n_units = n_params, n_prunable, n_units
        saved = saved or {}
        self.eq13 = {c: saved.get(f"eq13_{c}", 0.0) for c in self.CATEGORIES}
        self.payload = {c: saved.get(f"payload_{c}", 0.0) for c in self.CATEGORIES}

    def model(self, n_active_prunable: int, transfers: int, category: str = "models") -> None:
        """``transfers`` transfers of a model with this many unmasked kernel weights."""
        active = self.n_params - self.n_prunable + n_active_prunable
        self.eq13[category] += transfers * eq13_bytes(self.n_params, 1 - active / self.n_params)
        self.payload[category] += transfers * payload_bytes(
            self.n_params, self.n_prunable, n_active_prunable, self.n_units
        )

    def statistics(self, n_active_prunable: int, clients: int) -> None:
        """Score statistics uploaded by each client beyond its model: E[w²] of the unmasked
        parameters and one value per prunable weight (gradient sign where active, gradient
        where inactive), 4 bytes each, in both accounts. With ``--structure filters`` they
        stay per weight: a unit's score is the mean of Eq. 8's per-weight scores, which are
        not linear in these statistics (Eq. 10's variance, Eq. 11's |mean sign|), so a client
        cannot pool them per unit before the aggregation without changing the scores."""
        active = self.n_params - self.n_prunable + n_active_prunable
        extra = clients * 4.0 * (active + self.n_prunable)
        self.eq13["statistics"] += extra
        self.payload["statistics"] += extra

    def values(self, count: int, category: str = "clustering") -> None:
        """``count`` float32 values sent beside any model (e.g. label histograms: C per
        client), 4 bytes each, in both accounts."""
        self.eq13[category] += 4.0 * count
        self.payload[category] += 4.0 * count

    def scalars(self) -> dict[str, float]:
        return {
            f"{kind}_{c}": getattr(self, kind)[c]
            for kind in ("eq13", "payload")
            for c in self.CATEGORIES
        }

    def total_bytes(self, kind: str) -> float:
        """All bytes of ``kind`` (``"eq13"`` or ``"payload"``) over every category."""
        if kind not in ("eq13", "payload"):
            raise ValueError(f"kind must be 'eq13' or 'payload', got {kind!r}")
        return sum(getattr(self, kind).values())

    def total_mb(self, kind: str) -> float:
        """:meth:`total_bytes` in decimal megabytes (bytes / 10^6)."""
        return self.total_bytes(kind) / 1e6

    def total_mib(self, kind: str) -> float:
        """:meth:`total_bytes` in Eq. 13's unit, bytes / 1024² (the paper's "MB")."""
        return self.total_bytes(kind) / 1024**2

    def summary(self) -> dict[str, float | dict[str, float]]:
        """The ``summary.json`` entries: totals and per-category figures in MB (10^6 bytes)
        and Eq. 13 also in the paper's MiB."""
        return {
            "comm_mb_eq13": self.total_mb("eq13"),
            "comm_mb_payload": self.total_mb("payload"),
            "comm_mb_eq13_by_kind": {c: v / 1e6 for c, v in self.eq13.items()},
            "comm_mb_payload_by_kind": {c: v / 1e6 for c, v in self.payload.items()},
            "comm_mib_eq13": self.total_mib("eq13"),
            "comm_mib_eq13_by_kind": {c: v / 1024**2 for c, v in self.eq13.items()},
        }
