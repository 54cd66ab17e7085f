"""The prune-and-heal schedule of CA-AFP (Algorithm 1, lines 38-47).

At pruning round t of Phase 3 (t mod f == 0), with current sparsity S over the prunable
weights::

    R         = floor((T3 - t) / f)          # pruning steps left (line 42)
    dS        = (S_target - S) / R           # line 43
    N_churn   = rho * N_active               # line 44
    N_deficit = dS * N_total                 # line 45
    N_prune   = N_churn + N_deficit          # line 46
    N_grow    = N_churn                      # line 47

Interpretations (the paper is silent): at the last step R is 0, so R is taken as 1 (reach the
target now); counts are rounded to the nearest integer; a negative deficit (sparsity above
target) grows the surplus back (N_grow = N_churn - N_deficit) instead of pruning a negative
number; N_prune never exceeds the active weights. A start sparsity above the target (the
paper's Study A goes to 0.9 with a 0.7 target) is allowed: the negative deficits regrow the
surplus, and the target is reached at the last mask update.
"""

from __future__ import annotations

import dataclasses

from fedprune.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class PruneStep:
    """How many weights to prune and to regrow at one pruning round."""

    steps_left: int
    delta_sparsity: float
    n_churn: int
    n_deficit: int
    n_prune: int
    n_grow: int


@dataclasses.dataclass(frozen=True)
class PruneHealSchedule:
    """Parameters of the schedule; validated at construction.

    Attributes
    ----------
    rounds : T3, the number of Phase 3 rounds.
    frequency : f, prune every f rounds.
    target_sparsity : S_target in [0, 1).
    churn : rho in [0, 1], the fraction of active weights swapped at each step.
    start_sparsity : sparsity applied before the first Phase 3 round.
    """

    rounds: int
    frequency: int
    target_sparsity: float = 0.7
    churn: float = 0.05
    start_sparsity: float = 0.0

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise ConfigError(f"pruning rounds T3 must be >= 1, got {self.rounds}")
        if not 1 <= self.frequency <= self.rounds:
            raise ConfigError(
                f"prune frequency f must be in [1, T3={self.rounds}], got {self.frequency}"
            )
        if not 0.0 <= self.target_sparsity < 1.0:
            raise ConfigError(f"target sparsity must be in [0, 1), got {self.target_sparsity}")
        if not 0.0 <= self.start_sparsity < 1.0:  # above the target: healed back to it
            raise ConfigError(f"start sparsity must be in [0, 1), got {self.start_sparsity}")
        if not 0.0 <= self.churn <= 1.0:
            raise ConfigError(f"churn rate must be in [0, 1], got {self.churn}")

    def prunes_at(self, t: int) -> bool:
        """Whether Phase 3 round ``t`` (1-based) starts with a pruning step (line 38)."""
        return t % self.frequency == 0

    def step(self, t: int, n_total: int, n_active: int) -> PruneStep:
        """Counts for pruning round ``t`` (lines 41-47) given the prunable weight counts."""
        if not 0 <= n_active <= n_total:
            raise ValueError(f"need 0 <= active ({n_active}) <= total ({n_total})")
        sparsity = 1.0 - n_active / n_total
        steps_left = max((self.rounds - t) // self.frequency, 1)
        delta = (self.target_sparsity - sparsity) / steps_left
        n_churn = int(round(self.churn * n_active))
        n_deficit = int(round(delta * n_total))
        if n_deficit >= 0:
            n_prune, n_grow = min(n_churn + n_deficit, n_active), n_churn
        else:
            n_prune, n_grow = n_churn, n_churn - n_deficit
        n_grow = min(n_grow, n_total - n_active + n_prune)
        return PruneStep(steps_left, delta, n_churn, n_deficit, n_prune, n_grow)
