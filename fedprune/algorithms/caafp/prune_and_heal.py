"""CA-AFP: Cluster-Aware Adaptive Federated Pruning (Jha, Shukla, Lone 2026; Algorithm 1).

The phases are the shared :mod:`fedprune.algorithms.pipeline`; this module is CA-AFP's mask
policy, prune-and-heal (Alg. 1 lines 36-59): after every f-th Phase-3 round, scores (Eq. 8-11)
from that round's federated statistics, then one schedule step (lines 41-47): prune
N_churn + N_deficit lowest-score active weights, regrow N_churn inactive weights with the
largest |mean gradient| (they restart from zero).

Interpretations (the paper is silent or inconsistent; all configurable):

* Mask updates happen at the *end* of Phase-3 round t for t mod f == 0 and t < T2 (the last
  f rounds heal at the final mask). With R = floor((T2 - t)/f) >= 1 the target is reached at
  the last update. Magnitude (Eq. 9) is taken from the aggregated cluster model, coherence
  (Eq. 10) from the clients' trained models of that round, consistency (Eq. 11) and regrowth
  from gradients at the broadcast w_c ⊙ M_c: Eq. 5's gradient over each client's whole
  training set with dropout off (:mod:`fedprune.engine.client_work`).
* Start sparsity: Algorithm 1 starts dense (M = 1) while Tables 5-6 say "Start 70 %". Here
  ``start_sparsity`` > 0 prunes to it at the end of Phase-3 round 1 from that round's scores;
  default 0.7 as in the tables.
* Budgets are global over all prunable kernels (``budget="global"``), as Alg. 1 lines 44-48
  count N_active and N_total over the model and Eq. 9 normalizes by the model-wide maximum.
  ``budget="layerwise"`` is our extension for export size, not in the paper: the schedule's
  counts are computed from every kernel's own N_active and N_total and scores are ranked within
  the kernel, so every kernel reaches the target (:mod:`fedprune.sparsity.masks`).
* ``prune_layers`` (our extension) restricts pruning to the named layers' kernels: this policy
  then sees only those, so the start and target sparsities, N_active, N_total and Eq. 9's
  maximum are over them (e.g. ``--prune-layers dense --target-sparsity 0.95`` prunes about as
  many weights as 70 % of all kernels, all in the hidden dense layer).
* The start pruning happens exactly once, at Phase-3 round 1 (the reached sparsity can be a
  hair under ``start_sparsity``: with blocks, and per weight when the count rounds down, as
  70 % of WISDM's 124,032 kernel weights does; later scoring rounds are schedule steps
  regardless).
* ``structure="filters"`` (``--structure filters``, our extension): the same scores and
  schedule on whole filters and units (:mod:`fedprune.sparsity.structured`; the pipeline
  sets ``structured``): a unit scores the mean of its weights' Eq. 8 scores, and the start
  and target sparsities, N_active and N_total count units.
* lambda (``prox``) is not given in the paper; default 1e-3. Scoring weights default to the
  paper's per dataset: UCI-HAR (0.5, 0.25, 0.25), WISDM (0.25, 0.25, 0.5).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fedprune.configs.pipeline import PipelineConfig
from fedprune.sparsity import masks as M
from fedprune.sparsity.schedule import PruneHealSchedule
from fedprune.sparsity.scores import importance
from fedprune.sparsity.structured import StructuredMasks


@dataclasses.dataclass(frozen=True)
class PruneAndHeal:
    """CA-AFP's mask policy: the prune-and-heal ``schedule`` (its ``rounds`` = T2), the start
    sparsity reached after Phase-3 round 1, the score weights (alpha, beta, gamma) of Eq. 8,
    the mask unit (``block``) and the budget; ``structured``: whole filters and units instead
    (``--structure filters``)."""

    schedule: PruneHealSchedule
    start_sparsity: float
    weights: tuple[float, float, float]
    block: int = 1
    budget: str = "global"
    structured: StructuredMasks | None = None

    @classmethod
    def from_config(cls, config: PipelineConfig) -> PruneAndHeal:
        return cls(
            config.schedule(),
            config.start_sparsity,
            (config.alpha, config.beta, config.gamma),
            config.block,
            config.budget,
        )

    def scoring_round(self, t: int) -> bool:
        first = t == 1 and self.start_sparsity > 0
        return first or (t < self.schedule.rounds and self.schedule.prunes_at(t))

    def update(
        self,
        t: int,
        broadcast: list[np.ndarray],
        aggregated: list[np.ndarray],
        masks: list[np.ndarray],
        stats: dict[str, list[np.ndarray]],
    ) -> list[np.ndarray]:
        scores = importance(aggregated, stats["w"], stats["w2"], stats["grad_sign"], *self.weights)
        whole = self.structured
        if t == 1 and self.start_sparsity > 0 and whole is not None:
            return whole.prune_to(masks, scores, self.start_sparsity)
        if t == 1 and self.start_sparsity > 0:
            return M.prune_to(masks, scores, self.start_sparsity, self.block, self.budget)
        if whole is not None:
            return whole.heal(self.schedule, t, masks, scores, stats["grad"])
        regrow = [np.abs(g) for g in stats["grad"]]
        if self.budget == "layerwise":
            steps = [self.schedule.step(t, m.size, int(m.sum())) for m in masks]
            return M.prune_and_regrow_layerwise(
                masks,
                scores,
                regrow,
                [s.n_prune for s in steps],
                [s.n_grow for s in steps],
                self.block,
            )
        n_total = int(sum(m.size for m in masks))
        n_active = int(sum(m.sum() for m in masks))
        step = self.schedule.step(t, n_total, n_active)
        return M.prune_and_regrow(masks, scores, regrow, step.n_prune, step.n_grow, self.block)


def policy(config: PipelineConfig) -> PruneAndHeal:
    """CA-AFP's mask policy (Global-FT's too: it is CA-AFP with K = 1)."""
    return PruneAndHeal.from_config(config)
