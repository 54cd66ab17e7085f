"""The configuration of AS-CFL and its baselines on rotated, label-skewed image clients: one
class per method of ``fedprune train
ascfl|cfl|cfl-fixed|ifca`` (FedAvg is ``ifca --clusters 1``: one model averaged over all
clients). :class:`ClusteredImageConfig` is AS-CFL's and holds every field; the baselines'
classes share its fields, leave AS-CFL's own options unused and check their own options.
The class, not the recorded ``method`` name, says which method a configuration runs (the
rule registered for the class).

Defaults are the paper's (§4.1: 20 clients, α, sizes 10-60 %, rotations, learning rate 0.1
decayed by 0.99 per round, batch 32; §3: θ = 0.85, 20 % candidates, β = 0.8, α = 0.2, 95 %
explained variance) except the compute budget: 100 rounds of 10 local epochs of the 0.35 M
parameter CNN for 20 clients are hours per run on 2 cores, so the defaults are the scaled
setting (``--scale scaled``: ``image_cnn_small``, 30 rounds, 1 local epoch; docs/ascfl.md).
``--scale paper`` is the paper's setting (``image_cnn``, 100 rounds, 10 local epochs); an
explicit ``--model``, ``--rounds`` or ``--local-epochs`` overrides the scale's value.
"""

from __future__ import annotations

import dataclasses

from fedprune.checks import (
    FRACTION,
    POSITIVE,
    SEED,
    Rule,
    check_at_most,
    count,
    interval,
    one_of,
    optional,
)
from fedprune.configs import har
from fedprune.configs.fields import Config, param
from fedprune.configs.protocol import builtin_or_user_file, is_user_file
from fedprune.errors import ConfigError

IMAGE_DATASETS = ("mnist", "fashion_mnist", "emnist_digits")
IMAGE_MODELS = ("image_cnn", "image_cnn_small")
WITHOUT = ("incentive", "adjustment", "low-rank")
LOW_RANK_LAYERS = ("output", "dense_head")
# AS-CFL's defaults before these changed (Algorithm 1 read literally); the baselines, which
# do not use these options, record them at these values, as they always did
ALGORITHM_1_LITERAL = {
    "admission": "absolute_gain",
    "em_space": "raw",
    "merge_guard": "settled",
    "update_reference": "start",
    "stage1": "every_round",
    "warmup_rounds": 0,
    "low_rank_layers": "output",
}
ADMISSION = (
    "absolute_gain",
    "relative_gain",
    "accuracy_floor",
    "similarity_gate",
    "retained_ratio",
)
# AS-CFL's own options: the baselines do not use them
ASCFL_OPTIONS = frozenset(
    {
        "without",
        "theta",
        "admission",
        "gain",
        "explained_variance",
        "low_rank_layers",
        "split_threshold",
        "merge_threshold",
        "em_space",
        "singletons",
        "split_guard",
        "merge_guard",
        "update_reference",
        "stage1",
        "late_clients",
        "epochs_rule",
        "warmup_rounds",
    }
)
UNIT = interval(0, 1, low_open=True)
# the partition's options: your own images come with their clients and proxy set
PARTITION_OPTIONS = frozenset(
    {"alpha", "labels", "min_frac", "max_frac", "proxy_size", "proxy_rotation"}
)


def _check_model(name: str, value: str) -> str:
    if isinstance(value, str) and (value in IMAGE_MODELS or value.startswith(har.USER_MODEL)):
        return value
    raise ConfigError(
        f"--model must be one of {', '.join(IMAGE_MODELS)} (or your own model, given to the "
        f"Python API as model_fn), got {value!r}"
    )


# --clusters K or auto: the parse and rule of the pipeline's option (fedprune.configs.har)
_AUTO_CLUSTERS = har.clusters(4, auto=True)

# --scale: (model, rounds, local epochs)
SCALES = {"scaled": ("image_cnn_small", 30, 1), "paper": ("image_cnn", 100, 10)}


@dataclasses.dataclass(frozen=True)
class ClusteredImageConfig(Config):
    """One run of AS-CFL; the baselines' classes below (CFL, CFL with a fixed K, IFCA) share
    these fields."""

    dataset: str = param(
        "mnist",
        help="image dataset, or your own images as PATH.npz (keys x, y, client_id, proxy_x, "
        "proxy_y, optional group; docs/data.md)",
        rule=builtin_or_user_file(IMAGE_DATASETS, "images", "docs/data.md"),
        metavar="{" + ",".join(IMAGE_DATASETS) + ",PATH.npz}",
    )
    num_clients: int = param(20, help="clients N", flag="clients", rule=count(2))
    alpha: float = param(
        0.4, help="Dirichlet concentration of the label skew", rule=POSITIVE, group="data"
    )
    labels: str = param(
        "dirichlet",
        help="label partition: Dirichlet(alpha), or iid (clients differ only by rotation)",
        rule=one_of(("dirichlet", "iid")),
    )
    min_frac: float = param(0.1, help="smallest client size fraction", rule=UNIT)
    max_frac: float = param(0.6, help="largest client size fraction", rule=UNIT)
    proxy_size: int = param(1000, help="server proxy images (from the test split)", rule=count())
    proxy_rotation: str = param(
        "mixed",
        help="proxy images rotated by the four angles in equal numbers, or upright (two "
        "readings of 'an IID subset of the global test set')",
        rule=one_of(("mixed", "none")),
    )
    scale: str = param(
        "scaled",
        help="compute budget: the scaled setting, or the paper's (image_cnn, 100 rounds, "
        "10 local epochs; hours per run on 2 cores)",
        rule=one_of(tuple(SCALES)),
    )
    model: str | None = param(
        None,
        help="image CNN",
        rule=optional(Rule(_check_model, "")),
        default_text="by --scale: image_cnn_small / image_cnn",
    )
    rounds: int | None = param(
        None, help="global rounds", rule=optional(count()), default_text="by --scale: 30 / 100"
    )
    local_epochs: int | None = param(
        None,
        help="local epochs E (AS-CFL: the minimum, see --epochs-rule)",
        rule=optional(count()),
        default_text="by --scale: 1 / 10",
    )
    epochs_rule: str = param(
        "data_size",
        help="AS-CFL's local epochs per client (3.2.3): E_i = max(E, ceil(batch / n_i)), more "
        "epochs for a client with fewer examples than a batch (data_size), or E for all",
        rule=one_of(("data_size", "uniform")),
    )
    batch_size: int = har.batch_size()
    learning_rate: float = param(
        0.1, help="client SGD learning rate of round 1", flag="lr", rule=POSITIVE
    )
    lr_decay: float = param(0.99, help="learning-rate factor per round", rule=UNIT)
    client_dropout: float = param(
        0.0,
        help="fraction of clients that do not report in a round",
        rule=interval(0, 1, high_open=True),
    )
    without: str | None = param(
        None,
        help="AS-CFL ablation: leave this component out",
        rule=optional(one_of(WITHOUT)),
        default_text="none",
    )
    theta: float = param(
        0.85,
        help="positive-incentive threshold (accuracy_floor, similarity_gate, retained_ratio)",
        rule=UNIT,
    )
    admission: str = param(
        "retained_ratio",
        help="incentive admission rule: a candidate joins if the cluster keeps >= theta of its "
        "proxy accuracy (retained_ratio), gains --gain (absolute_gain, relative_gain), or "
        "gains while accuracy / mean similarity >= theta (accuracy_floor, similarity_gate)",
        rule=one_of(ADMISSION),
    )
    gain: float = param(0.03, help="accuracy gain a new member must bring", rule=FRACTION)
    explained_variance: float = param(0.95, help="low-rank: variance kept", rule=UNIT)
    low_rank_layers: str = param(
        "dense_head",
        help="low-rank: the 'weights near the output layer' factorized: the output layer, or "
        "every Dense layer after the convolutions (docs/ascfl.md, Interpretations)",
        rule=one_of(LOW_RANK_LAYERS),
    )
    em_space: str = param(
        "unit",
        help="vectors EM and G_k compare: the raw updates (Euclidean, as 3.3 writes) or "
        "their directions (unit vectors, as the cosine similarity of 3.2.1)",
        rule=one_of(("raw", "unit")),
    )
    singletons: str = param(
        "keep",
        help="single-client clusters: kept apart (G_k = 0 would merge every one) or merged "
        "by the G_k < merge-threshold rule like the others",
        rule=one_of(("keep", "merge")),
    )
    split_guard: str = param(
        "none",
        help="split a cluster above beta only if both halves' G_k end up <= beta (halves), "
        "or always as 3.3 writes (none)",
        rule=one_of(("none", "halves")),
    )
    merge_guard: str = param(
        "compact",
        help="merge two clusters only if their union's G_k <= beta (settled: not split "
        "again) or <= the merge threshold (compact: as compact as the rule asks)",
        rule=one_of(("settled", "compact")),
    )
    update_reference: str = param(
        "common",
        help="the update AS-CFL's similarity, EM and G_k compare: each client's change from "
        "the model it received (start), or from the clients' common mean model (common)",
        rule=one_of(("start", "common")),
    )
    stage1: str = param(
        "first_round",
        help="when AS-CFL's incentive clustering (Stage 1) forms clusters: every round, as "
        "Algorithm 1 places it, or once (the first round after the warm-up), Stage 2 "
        "adjusting them after",
        rule=one_of(("every_round", "first_round")),
    )
    late_clients: str = param(
        "lowest_loss",
        help="AS-CFL with --stage1 first_round and --client-dropout: a client absent when the "
        "clusters formed joins, when it next reports, the cluster whose model has the lowest "
        "loss on its training data (lowest_loss), or stays in the cluster its old cluster's "
        "members went to (follow)",
        rule=one_of(("lowest_loss", "follow")),
    )
    warmup_rounds: int = param(
        5,
        help="AS-CFL: FedAvg rounds (one model for all) before Stage 1 first forms clusters "
        "(a departure from the paper, docs/ascfl.md); 0 clusters from round 1, as Algorithm 1",
        rule=count(0),
    )
    split_threshold: float = param(0.8, help="G_k above this splits (beta)", rule=POSITIVE)
    merge_threshold: float = param(0.2, help="G_k below this merges", rule=POSITIVE)
    clip_norm: float | None = param(
        None, help="DP: L2 clip of each update", rule=optional(POSITIVE), default_text="no clipping"
    )
    noise_multiplier: float = param(0.0, help="DP: Gaussian noise multiplier z", rule=interval(0))
    clusters: int | str = param(
        4,
        help="clusters K (cfl-fixed, ifca), or auto: K and the first clusters chosen before "
        "round 1 from the clients' one-epoch updates by the largest mean silhouette, 1 when "
        f"none reaches {har.MIN_SILHOUETTE:g} (see --max-clusters)",
        rule=_AUTO_CLUSTERS.metadata["rule"],
        parse=_AUTO_CLUSTERS.metadata["parse"],
        metavar=_AUTO_CLUSTERS.metadata["metavar"],
    )
    max_clusters: int = param(
        8,
        help="with --clusters auto: the most clusters tried (K = 2..min(this, clients - 1))",
        rule=count(2),
        metavar="K",
    )
    eps1: float = param(
        0.4, help="CFL: split when the mean update norm is below this", rule=POSITIVE
    )
    eps2: float = param(1.6, help="CFL: ... and the largest update norm above this", rule=POSITIVE)
    seed: int = param(0, help="seed of the partition, models, sampling", rule=SEED)
    method: str = har.method("ascfl")
    dataset_sha256: str | None = har.dataset_sha256()

    def unused_fields(self) -> frozenset[str]:
        unused = {"clusters", "max_clusters", "eps1", "eps2"}  # the baselines' options
        if not self.has_late_clients:  # nobody misses the round that forms the clusters
            unused.add("late_clients")
        return frozenset(unused) | self._partition_unused()

    def _partition_unused(self) -> frozenset[str]:
        return PARTITION_OPTIONS if is_user_file(self.dataset) else frozenset()

    def __post_init__(self) -> None:
        scaled = dict(zip(("model", "rounds", "local_epochs"), SCALES.get(self.scale, ())))
        for name, value in scaled.items():
            if getattr(self, name) is None:
                self._set(name, value)
        super().__post_init__()

    def recorded(self) -> dict:
        """``--scale`` only fills in the model, rounds and local epochs, which are recorded;
        run directories from before ``--scale`` existed resume, and so do those from before
        ``--em-space``, ``--singletons``, ``--split-guard``, ``--merge-guard``,
        ``--update-reference``, ``--stage1``, ``--epochs-rule``, ``--warmup-rounds``,
        ``--low-rank-layers`` and ``--late-clients`` where they hold the value they had before
        the option existed (the pairs below; ``data_size`` equals ``uniform`` on every
        partition that has no client smaller than a batch). Six of those defaults changed
        later (``ALGORITHM_1_LITERAL``), so a run with today's defaults records them and an older
        default run is not resumed as one."""
        recorded = super().recorded()
        recorded.pop("scale")
        for name in self._partition_unused():  # your images: no partition was made
            recorded.pop(name)
        if recorded["dataset_sha256"] is None:  # a built-in dataset's runs record none
            del recorded["dataset_sha256"]
        recorded.update(self._recorded_unused())
        if "max_clusters" in self.unused_fields():  # read only with --clusters auto
            recorded.pop("max_clusters")  # so runs made before the option resume
        later = (
            ("em_space", "raw"),
            ("singletons", "keep"),
            ("split_guard", "none"),
            ("merge_guard", "settled"),
            ("update_reference", "start"),
            ("stage1", "every_round"),
            ("epochs_rule", "data_size"),
            ("warmup_rounds", 0),
            ("low_rank_layers", "output"),
            ("late_clients", "follow"),
        )
        for name, default in later:
            if recorded[name] == default:
                recorded.pop(name)
        # every run without late clients is the same under both values
        if not self.has_late_clients:
            recorded.pop("late_clients", None)
        return recorded

    def _recorded_unused(self) -> dict:
        """Unused options recorded at one fixed value, so that every run that differs only in
        them is the same run (AS-CFL uses all of its options)."""
        return {}

    @property
    def reporting_clients(self) -> int:
        """The clients that report in every round: all but ``client_dropout`` of them."""
        return self.num_clients - int(round(self.client_dropout * self.num_clients))

    @property
    def has_late_clients(self) -> bool:
        """Whether clients can miss the one round that forms AS-CFL's clusters (Stage 1 once,
        some dropout): only then does ``--late-clients`` change the run."""
        return self.stage1 == "first_round" and self.client_dropout > 0

    def check(self) -> None:
        """The checks of every clustered run, then AS-CFL's own."""
        self._check_shared()
        if self.split_threshold <= self.merge_threshold:
            raise ConfigError(
                f"--split-threshold {self.split_threshold} must be above --merge-threshold "
                f"{self.merge_threshold}"
            )
        if self.warmup_rounds >= self.rounds:
            raise ConfigError(
                f"--warmup-rounds {self.warmup_rounds} leaves none of the {self.rounds} rounds "
                "to cluster; give fewer warm-up rounds than --rounds"
            )

    def _check_shared(self) -> None:
        """The checks of every method's run."""
        own = {f.name: f.default for f in dataclasses.fields(self)}["method"]
        if self.method != own:  # the class runs its method; the name is only recorded
            raise ConfigError(
                f"{type(self).__name__} runs {own}, not {self.method}; use the configuration "
                f"class of {self.method} (fedprune.methods)"
            )
        if self.min_frac > self.max_frac:
            raise ConfigError(
                f"--min-frac {self.min_frac} is above --max-frac {self.max_frac}; "
                "give min <= max"
            )
        if self.noise_multiplier > 0 and self.clip_norm is None:
            raise ConfigError("--noise-multiplier needs --clip-norm (the sensitivity)")
        if self.clusters == har.AUTO and "clusters" in self.unused_fields():
            raise ConfigError(
                f"--clusters auto: {self.method} adapts its number of clusters itself as it "
                "trains; --clusters auto chooses K for the methods with a fixed K (cfl-fixed, "
                "ifca); leave --clusters out"
            )
        if self.reporting_clients < 1:
            raise ConfigError(
                f"--client-dropout {self.client_dropout:g} leaves none of the "
                f"{self.num_clients} clients (--clients) reporting in a round; give a smaller "
                "--client-dropout or more --clients"
            )


@dataclasses.dataclass(frozen=True)
class _BaselineConfig(ClusteredImageConfig):
    """What the baselines share: AS-CFL's options are unused and recorded at the values they
    had before their defaults changed (so the baselines' run directories from then resume,
    and an AS-CFL option given to a baseline does not make another run); no client is late
    (clusters are formed every round)."""

    def unused_fields(self) -> frozenset[str]:
        unused = {"clusters", "max_clusters", "eps1", "eps2"}
        return ASCFL_OPTIONS | unused | self._partition_unused()

    def _k_unused(self) -> frozenset[str]:
        """The unused fields of a method with a fixed K (cfl-fixed, ifca): ``--clusters`` is
        used, ``--max-clusters`` only with ``--clusters auto``."""
        used = {"clusters", "max_clusters"} if self.clusters == har.AUTO else {"clusters"}
        return _BaselineConfig.unused_fields(self) - used

    def _check_choosable(self) -> None:
        """``--clusters auto`` on ``--clients`` N: the silhouette scores K = 2..N - 1 only,
        so at least 3 clients and ``--max-clusters`` at most N - 1 (the pipeline's
        ``check_choosable``); one ConfigError line, before anything is made."""
        n = self.num_clients
        if n < 3:
            raise ConfigError(
                f"--clusters auto needs at least 3 clients to choose K (the silhouette scores "
                f"K = 2..N - 1), --clients is {n}; give --clusters 1" + (" or 2" if n == 2 else "")
            )
        check_at_most(
            "max_clusters",
            self.max_clusters,
            n - 1,
            f"--clients {n} - 1: the silhouette scores K up to N - 1",
        )

    def _recorded_unused(self) -> dict:
        unused = self.unused_fields()
        return {k: v for k, v in ALGORITHM_1_LITERAL.items() if k in unused}

    @property
    def has_late_clients(self) -> bool:
        return False

    def check(self) -> None:
        self._check_shared()


@dataclasses.dataclass(frozen=True)
class CFLConfig(_BaselineConfig):
    """CFL (Sattler et al.): recursive bipartition of clusters by update similarity."""

    method: str = har.method("cfl")

    def unused_fields(self) -> frozenset[str]:
        return super().unused_fields() - {"eps1", "eps2"}


@dataclasses.dataclass(frozen=True)
class CFLFixedConfig(_BaselineConfig):
    """CFL with a fixed number of clusters (the AS-CFL paper's baseline reading)."""

    method: str = har.method("cfl-fixed")

    def unused_fields(self) -> frozenset[str]:
        return self._k_unused()

    def check(self) -> None:
        super().check()
        auto = self.clusters == har.AUTO
        if auto:
            self._check_choosable()
        check_at_most(  # K clusters of the clients that report
            "max_clusters" if auto else "clusters",
            self.max_clusters if auto else self.clusters,
            self.reporting_clients,
            f"the clients reporting in a round: --clients {self.num_clients}, "
            f"--client-dropout {self.client_dropout:g}",
        )


@dataclasses.dataclass(frozen=True)
class IFCAConfig(_BaselineConfig):
    """IFCA: K models, each client trains the one with the lowest loss (K = 1: FedAvg)."""

    method: str = har.method("ifca")

    def unused_fields(self) -> frozenset[str]:
        return self._k_unused()

    def check(self) -> None:
        super().check()
        if self.clusters == har.AUTO:
            self._check_choosable()
        else:  # more models than clients: some could never be chosen
            check_at_most("clusters", self.clusters, self.num_clients, "--clients")
