"""Configurations of the clustered, masked pipeline that CA-AFP and its baselines share:
:class:`PipelineConfig` (defaults: CA-AFP's, the paper's Tables 5-6) and one subclass per
method that only changes defaults: :class:`CAAFPConfig`, :class:`GlobalFTConfig` (K = 1),
:class:`FedCHARConfig` (10 warm-up + 40 cluster rounds, dense), :class:`EfficientFLConfig` and
:class:`FedSNIPConfig` (K = 1, no proximal term, one fixed 70 % mask set after round 1).

Construction fills and checks everything (what ``resolved()`` and ``validate()`` did):

* unset scoring weights alpha, beta, gamma (Eq. 8) take :data:`PAPER_SCORE_WEIGHTS` for the
  dataset; give all three or none. They are filled at construction, so
  ``dataclasses.replace(config, dataset=...)`` keeps the first dataset's weights: build a new
  configuration instead;
* ``prune_layers`` is put in model order (each once; names from the model table,
  :data:`fedprune.models.table.MODELS`);
* with T2 > 0 the prune-and-heal schedule is built once to check its parameters
  (:class:`fedprune.sparsity.schedule.PruneHealSchedule`).

Each method's Phase-3 mask policy is registered against its configuration class in
:data:`MASK_POLICIES` by the module that implements it (the pipeline's table of policies), so
a configuration names no module; ``PRUNES`` says whether the method prunes at all (FedCHAR
does not), which the checks here need before any policy is loaded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

from fedprune.checks import (
    FRACTION,
    MAX_COUNT,
    NONNEGATIVE,
    POSITIVE,
    SPARSITY,
    Rule,
    check_layer_names,
    count,
    one_of,
    optional,
)
from fedprune.configs import har
from fedprune.configs.fields import Config, int_tuple, name_tuple, param
from fedprune.configs.protocol import BEFORE_SPLIT, SettledByRunDir
from fedprune.configs.strategies import ByConfig
from fedprune.errors import ConfigError
from fedprune.models.table import MODELS
from fedprune.sparsity.schedule import PruneHealSchedule

# Tables 5-6 of the paper: scoring weights (alpha, beta, gamma) per dataset.
PAPER_SCORE_WEIGHTS = {"uci_har": (0.5, 0.25, 0.25), "wisdm": (0.25, 0.25, 0.5)}

# fedprune.sparsity.masks.BUDGETS (not imported: it loads numpy; tests/configs check they agree)
BUDGETS = ("global", "layerwise")
# fedprune.sparsity.structured.STRUCTURES (not imported: it loads numpy; tests agree)
STRUCTURES = ("weights", "filters")

MODEL = "har_cnn"  # the table model the pipeline methods train (fedprune.models.table)

# what clients send for the clustering (the pipeline's phases)
CLUSTER_SIGNALS = ("update", "labels")

# --recluster: K fixed after the clustering step, or AS-CFL's split/merge every N rounds
# (the pipeline's recluster module)
RECLUSTER = ("none", "split-merge")
SPLIT_GUARDS = ("halves", "none")  # AS-CFL's split_merge.SPLIT_GUARDS
# the options read only with --recluster split-merge
RECLUSTER_OPTIONS = ("recluster_every", "split_threshold", "merge_threshold", "split_guard")


def _check_phases(name: str, phases: tuple[int, ...]) -> tuple[int, ...]:
    ok = len(phases) == 3 and all(isinstance(t, int) and not isinstance(t, bool) for t in phases)
    if not ok or min(phases) < 0 or sum(phases) < 1:
        raise ConfigError(
            f"--phases T0,T1,T2 must be 3 integers >= 0 and not all 0, got {tuple(phases)}"
        )
    if sum(phases) + 1 > MAX_COUNT:  # the rounds of the run: T0 + 1 + T1 + T2
        raise ConfigError(
            f"--phases T0,T1,T2 must add up to less than {MAX_COUNT} (the largest count "
            f"fedprune takes), got {tuple(phases)}"
        )
    return phases


def _check_prune_layers(name: str, names: tuple[str, ...]) -> tuple[str, ...]:
    if not all(isinstance(n, str) and n for n in names):
        raise ConfigError(f"--prune-layers must be layer names, got {names!r}")
    return names  # which names exist: check() for a table model, the run for your own


PHASES = Rule(_check_phases, "T0,T1,T2 >= 0, not all 0")
PRUNE_LAYERS = optional(
    Rule(_check_prune_layers, "names among " + ", ".join(MODELS[MODEL].kernel_layers))
)
SCORE_WEIGHT = optional(FRACTION)


@dataclasses.dataclass(frozen=True)
class PipelineConfig(SettledByRunDir, Config):
    """Hyper-parameters; defaults are CA-AFP's from the paper's Tables 5-6. ``PRUNES``: the
    method has a Phase-3 mask policy (:meth:`policy`; ``False``: a dense method)."""

    PRUNES: ClassVar[bool] = True
    # options added later, with the value a run directory made before each existed used
    ADDED_LATER: ClassVar[Mapping] = {
        "budget": "global",
        "structure": "weights",
        "prune_layers": None,
        "eval_every": 5,
        "max_clusters": 8,
        "cluster_signal": "update",
        "cluster_signal_noise": 0.0,
        "cluster_signal_clip": None,
        "recluster": "none",
        "recluster_every": 10,
        "split_threshold": 0.8,
        "merge_threshold": 0.2,
        "split_guard": "halves",
        **BEFORE_SPLIT,
    }

    dataset: str = har.dataset()
    method: str = har.method("caafp")
    phases: tuple[int, int, int] = param(
        (0, 0, 50),
        help="rounds of FedAvg, dense cluster training, masked cluster training",
        rule=PHASES,
        parse=int_tuple(3),
        metavar="T0,T1,T2",
    )
    clusters: int | str = har.clusters(auto=True)
    clients_per_round: int = har.clients_per_round()
    local_epochs: int = har.local_epochs()
    batch_size: int = har.batch_size()
    learning_rate: float = har.learning_rate()
    prox: float = param(1e-3, help="lambda of the proximal term, Eq. 5", rule=NONNEGATIVE)
    start_sparsity: float = param(
        0.7, help="sparsity after Phase-3 round 1 (CA-AFP)", rule=SPARSITY
    )
    target_sparsity: float = param(0.7, help="final sparsity of the pruned kernels", rule=SPARSITY)
    prune_frequency: int = param(5, help="update masks every f rounds (CA-AFP)", rule=count())
    churn: float = param(0.05, help="churn rate rho (CA-AFP)", rule=FRACTION)
    alpha: float | None = param(
        None,
        help="weight of the magnitude score (CA-AFP)",
        rule=SCORE_WEIGHT,
        group="pruning",
        default_text="the paper's for the dataset",
    )
    beta: float | None = param(
        None,
        help="weight of the coherence score (CA-AFP)",
        rule=SCORE_WEIGHT,
        group="pruning",
        default_text="the paper's for the dataset",
    )
    gamma: float | None = param(
        None,
        help="weight of the consistency score (CA-AFP)",
        rule=SCORE_WEIGHT,
        group="pruning",
        default_text="the paper's for the dataset",
    )
    block: int = param(
        1,
        help="mask granularity: 1 = per weight; 16 = blocks TFLite stores compactly",
        rule=count(),
    )
    budget: str | None = param(
        None,
        help="pruning budget: global = one ranking over all kernels (the paper's Alg. 1); "
        "layerwise = every kernel pruned to the target on its own (our extension, for export "
        "size)",
        rule=optional(one_of(BUDGETS)),
        default_text="global; layerwise with --structure filters, where one ranking of whole "
        "units empties layers (docs/caafp.md)",
    )
    structure: str = param(
        "weights",
        help="what a mask removes: weights = single weights (the paper); filters = whole "
        "convolution filters and dense units with the next layer's inputs that read them, the "
        "classifier's outputs kept, so that edge-export builds a smaller model; the sparsity "
        "targets then count units, scored by the mean of their weights' scores (our extension, "
        "docs/caafp.md)",
        rule=one_of(STRUCTURES),
        group="pruning",
    )
    prune_layers: tuple[str, ...] | None = param(
        None,
        help="prune only the kernels of these layers; the sparsity targets then count only "
        "their weights, the other kernels stay dense (our extension, for export size)",
        rule=PRUNE_LAYERS,
        parse=name_tuple,
        metavar="NAME[,NAME...]",
        default_text="all, the paper",
    )
    ft_epochs: tuple[int, ...] = har.ft_epochs()
    eval_every: int = har.eval_every()
    seed: int = har.seed()
    standardize: bool | None = har.standardize()
    split: str | None = har.split()
    label_noise: tuple[float, float] | None = har.label_noise()
    classes_per_client: int | None = har.classes_per_client()
    dataset_sha256: str | None = har.dataset_sha256()
    model: str = har.model()
    max_clusters: int = param(
        8,
        help="with --clusters auto: the most clusters tried (K = 2..min(this, clients - 1)); "
        "with --recluster split-merge: the most clusters splits may make",
        rule=count(2),
        metavar="K",
    )
    cluster_signal: str = param(
        "update",
        help="what each client sends for the clustering: update = its one-epoch model update "
        "(the paper, Eq. 3); labels = its label histogram (C numbers: its class proportions)",
        rule=one_of(CLUSTER_SIGNALS),
    )
    cluster_signal_noise: float = param(
        0.0,
        help="local DP of the clustering upload: each client clips its signal to "
        "--cluster-signal-clip and adds Gaussian noise of this many times the clip "
        "(TFF's DP aggregator on its own vector; (epsilon, delta) in summary.json; "
        "0 = off)",
        rule=NONNEGATIVE,
        metavar="Z",
    )
    cluster_signal_clip: float | None = param(
        None,
        help="with --cluster-signal-noise: the L2 norm each client's upload is clipped to",
        rule=optional(POSITIVE),
        default_text="none",
        metavar="C",
    )
    recluster: str = param(
        "none",
        help="none = K stays as the clustering step set it (the paper); split-merge = every "
        "--recluster-every rounds of Phases 2-3, AS-CFL's rule splits a cluster whose "
        "dispersion-to-separation ratio G_k is above --split-threshold and merges one below "
        "--merge-threshold (docs/caafp.md)",
        rule=one_of(RECLUSTER),
    )
    recluster_every: int = param(
        10,
        help="with --recluster split-merge: rounds of Phases 2-3 between split/merge passes "
        "(each pass: one local epoch per client, the clustering step's traffic)",
        rule=count(),
        metavar="N",
    )
    split_threshold: float = param(
        0.8,
        help="with --recluster split-merge: G_k above this splits a cluster (AS-CFL's beta)",
        rule=POSITIVE,
        metavar="BETA",
    )
    merge_threshold: float = param(
        0.2,
        help="with --recluster split-merge: G_k below this merges a cluster with the nearest "
        "(AS-CFL's alpha)",
        rule=NONNEGATIVE,
        metavar="ALPHA",
    )
    split_guard: str = param(
        "halves",
        help="with --recluster split-merge: split only if both halves' G_k end up at most "
        "--split-threshold (halves), or always (none, AS-CFL as written)",
        rule=one_of(SPLIT_GUARDS),
    )

    def unused_fields(self) -> frozenset[str]:
        """``--max-clusters`` is read only with ``--clusters auto`` or ``--recluster
        split-merge``, ``--cluster-signal`` only where clients are clustered (not with
        ``--clusters 1``), the split/merge settings only with ``--recluster split-merge``."""
        unused = set()
        if self.clusters != har.AUTO and self.recluster == "none":
            unused.add("max_clusters")
        if self.clusters == 1 and self.recluster == "none":
            unused.update(("cluster_signal", "cluster_signal_noise", "cluster_signal_clip"))
        elif self.cluster_signal_noise == 0:
            unused.add("cluster_signal_clip")
        if self.recluster == "none":
            unused.update(RECLUSTER_OPTIONS)
        return frozenset(unused)

    def check(self) -> None:
        if self.budget is None:  # the recorded configuration holds the budget chosen here
            self._set("budget", "layerwise" if self.structure == "filters" else "global")
        if self.cluster_signal_noise > 0 and self.cluster_signal_clip is None:
            raise ConfigError(
                "--cluster-signal-noise needs --cluster-signal-clip (the L2 norm each upload "
                "is clipped to, which the noise is scaled by): e.g. --cluster-signal-clip 1"
            )
        if self.recluster != "none":
            self._check_recluster()
        auto = self.clusters == har.AUTO
        most = self.max_clusters if auto else self.clusters
        if self.phases[1] + self.phases[2] > 0 and self.clients_per_round < most:
            # Phases 2-3 sample at least one client of every cluster
            if auto:
                fewer = self.clients_per_round
                raise ConfigError(
                    f"--clients-per-round {fewer} is below --max-clusters {most}: every "
                    f"Phase 2-3 round trains at least one client per cluster; give "
                    f"--clients-per-round {most} or more"
                    + (f", or --max-clusters {fewer} or less" if fewer >= 2 else "")
                )
            raise ConfigError(
                f"--clients-per-round {self.clients_per_round} is below --clusters "
                f"{self.clusters}: every Phase 2-3 round trains at least one client per "
                f"cluster; give --clients-per-round {self.clusters} or more, or fewer --clusters"
            )
        weights = (self.alpha, self.beta, self.gamma)
        if None in weights:
            if not all(v is None for v in weights):
                raise ConfigError("give all of --alpha, --beta, --gamma or none")
            weights = PAPER_SCORE_WEIGHTS.get(self.dataset, (1 / 3, 1 / 3, 1 / 3))
            for name, value in zip(("alpha", "beta", "gamma"), weights):
                self._set(name, value)
        if abs(sum(weights) - 1.0) > 1e-6:  # Eq. 8
            raise ConfigError(f"--alpha + --beta + --gamma must be 1, got {sum(weights):g}")
        if self.prune_layers is not None and self.model in MODELS:  # in model order, each once
            check_layer_names(self.prune_layers, MODELS[self.model].kernel_layers)
            chosen = tuple(n for n in MODELS[self.model].kernel_layers if n in self.prune_layers)
            self._set("prune_layers", chosen)
        self._set("phases", tuple(self.phases))
        self._set("ft_epochs", tuple(self.ft_epochs))
        t0, t1, t2 = self.phases
        if 0 < t2 < self.prune_frequency:
            raise ConfigError(
                f"--prune-frequency {self.prune_frequency} is more than the {t2} pruning "
                f"round(s) of --phases {t0},{t1},{t2}: give --prune-frequency {t2} or less, or "
                f"--phases {t0},{t1},{self.prune_frequency} or more"
            )
        if t2 > 0:
            self.schedule()  # checks the sparsity parameters against T2
        if self.structure != "weights":
            self._check_structure()

    def _check_structure(self) -> None:
        """``--structure filters`` needs masked rounds and a method with a mask policy, and
        takes no ``--block`` (a unit is a whole filter) and no ``--recluster`` (a merge
        re-prunes the joined masks per weight): one ConfigError line."""
        if not self.PRUNES or self.phases[2] == 0:
            t0, t1, t2 = self.phases
            raise ConfigError(
                f"--structure {self.structure}: {self.method} with --phases {t0},{t1},{t2} "
                "trains no masked rounds (T2 = 0 or a dense method), so nothing is pruned; "
                "give --phases with T2 > 0 or leave --structure out"
            )
        if self.block != 1:
            raise ConfigError(
                f"--structure {self.structure} removes whole filters and units, --block "
                f"{self.block} blocks of weights: give one of them"
            )
        if self.recluster != "none":
            raise ConfigError(
                f"--structure {self.structure} with --recluster {self.recluster}: a merge joins "
                "two clusters' masks weight by weight, which removes no whole filters; give one "
                "of them"
            )

    def _check_recluster(self) -> None:
        """``--recluster split-merge`` needs clusters to split or merge (K >= 2 or auto),
        a pass within Phases 2-3, β > α and room for K to grow: one ConfigError line."""
        t0, t1, t2 = self.phases
        if self.clusters == 1:
            raise ConfigError(
                "--recluster split-merge needs at least 2 clusters to compare (G_k divides a "
                "cluster's dispersion by its distance to the nearest other one): give "
                "--clusters 2 or more, or auto"
            )
        if t1 + t2 < 2:
            raise ConfigError(
                f"--recluster split-merge needs at least 2 rounds of Phases 2-3 (a pass runs "
                f"between two of them), --phases {t0},{t1},{t2} has {t1 + t2}"
            )
        if t1 + t2 <= self.recluster_every:
            raise ConfigError(
                f"--recluster-every {self.recluster_every} leaves no split/merge pass in the "
                f"{t1 + t2} rounds of Phases 2-3 (--phases {t0},{t1},{t2}; a pass runs before "
                f"round N + 1, 2N + 1, ... of them): give --recluster-every {t1 + t2 - 1} or less"
            )
        if self.split_threshold <= self.merge_threshold:
            raise ConfigError(
                f"--split-threshold {self.split_threshold:g} must be above --merge-threshold "
                f"{self.merge_threshold:g}, else a cluster could be both split and merged"
            )
        if self.clusters != har.AUTO and self.clusters > self.max_clusters:
            raise ConfigError(
                f"--clusters {self.clusters} is above --max-clusters {self.max_clusters}, the "
                f"most clusters --recluster split-merge may make: give --max-clusters "
                f"{self.clusters} or more"
            )
        if self.clients_per_round < self.max_clusters and self.clusters != har.AUTO:
            fewer = self.clients_per_round
            raise ConfigError(
                f"--clients-per-round {fewer} is below --max-clusters {self.max_clusters}, the "
                "most clusters --recluster split-merge may make: every Phase 2-3 round trains "
                f"at least one client per cluster; give --clients-per-round "
                f"{self.max_clusters} or more, or --max-clusters {fewer} or less"
            )

    def policy(self) -> Any:  # noqa: ANN401 (the pipeline's MaskPolicy)
        """The method's mask policy for Phase 3, built by the factory registered for this
        configuration's class (:data:`MASK_POLICIES`); ``None`` for a dense method or when
        T2 = 0."""
        if not self.PRUNES or self.phases[2] == 0:
            return None
        factory = MASK_POLICIES.of(self)
        return None if factory is None else factory(self)

    def schedule(self) -> PruneHealSchedule:
        """The prune-and-heal schedule of Phase 3 (T2 rounds)."""
        return PruneHealSchedule(
            rounds=self.phases[2],
            frequency=self.prune_frequency,
            target_sparsity=self.target_sparsity,
            churn=self.churn,
            start_sparsity=self.start_sparsity,
        )


def override(name: str, value: object) -> Any:  # noqa: ANN401 (a dataclass field)
    """PipelineConfig's field ``name`` with another default (same help, rule, option)."""
    base = PipelineConfig.__dataclass_fields__[name]
    return dataclasses.field(default=value, metadata=base.metadata)


@dataclasses.dataclass(frozen=True)
class CAAFPConfig(PipelineConfig):
    """CA-AFP (Algorithm 1) with the paper's defaults (Tables 5-6)."""

    method: str = override("method", "caafp")


@dataclasses.dataclass(frozen=True)
class GlobalFTConfig(PipelineConfig):
    """Global-FT: CA-AFP with one cluster (the paper's Figures 3-4): prune-and-heal from the
    federated importance scores on one global model, then per-client masked fine-tuning of
    the one global sparse model."""

    method: str = override("method", "global_ft")
    clusters: int = override("clusters", 1)


@dataclasses.dataclass(frozen=True)
class FedCHARConfig(PipelineConfig):
    """FedCHAR baseline (Li et al., clustered personalized HAR; CA-AFP paper's [21]): the
    pipeline with no mask policy (dense). 10 rounds of FedAvg warm-up; hierarchical
    (average-linkage) clustering of the clients' update directions by cosine similarity into
    K = 3 groups; 40 rounds of per-group training with a proximal personalization term
    towards the warm-up model; then per-client fine-tuning.

    Interpretations: the update directions are one local epoch from the warm-up model (the
    same clustering step as CA-AFP); the personalization term is the proximal term of Eq. 5
    with lambda = 1e-3; the round budget (50) matches the other methods."""

    PRUNES: ClassVar[bool] = False

    method: str = override("method", "fedchar")
    phases: tuple[int, int, int] = override("phases", (10, 40, 0))
    clusters: int = override("clusters", 3)
    start_sparsity: float = override("start_sparsity", 0.0)
    target_sparsity: float = override("target_sparsity", 0.0)


@dataclasses.dataclass(frozen=True)
class _OneShotConfig(PipelineConfig):
    """A K = 1, no-proximal-term, 50-round pipeline whose mask is set once (70 %): no churn,
    and the schedule frequency is unused (1 always passes the schedule's check)."""

    phases: tuple[int, int, int] = override("phases", (0, 0, 50))
    clusters: int = override("clusters", 1)
    prox: float = override("prox", 0.0)
    start_sparsity: float = override("start_sparsity", 0.0)
    churn: float = override("churn", 0.0)
    prune_frequency: int = override("prune_frequency", 1)


@dataclasses.dataclass(frozen=True)
class EfficientFLConfig(_OneShotConfig):
    """EfficientFL: one magnitude mask (70 %) after the first round, K = 1."""

    method: str = override("method", "efficientfl")


@dataclasses.dataclass(frozen=True)
class FedSNIPConfig(_OneShotConfig):
    """FedSNIP: one SNIP mask (70 %) from the first round's mean gradient, K = 1."""

    method: str = override("method", "fedsnip")


MASK_POLICIES: ByConfig[Any] = ByConfig("mask policy", attribute="POLICY")
"""Each pipeline method's mask policy factory (``factory(config) -> MaskPolicy``), by
configuration class; filled by the pipeline's table of policies when it is imported. A
configuration class of your own may instead name its factory as ``POLICY =
"module:function"`` in its class body (:mod:`fedprune.configs.strategies`)."""
