"""Which reading of AS-CFL's admission test lets the incentive clustering find the rotation
groups? Measures the clusters each admission rule forms on real client updates
(docs/ascfl.md "How the defaults were chosen").

MNIST, 20 clients, IID labels (``--labels iid``: clients differ only by their rotation, so
the four rotation groups are the right clusters; ``--alpha A``: Dirichlet(A) labels, the
main comparison's partition at 0.4), scaled setting (``image_cnn_small``, one
local epoch). FedAvg trains the shared model for ``--rounds`` rounds on the TFF engine
(:mod:`fedprune.engine.per_client`); at each round listed in ``--at``, AS-CFL's regrouping
(:meth:`fedprune.algorithms.ascfl.rules.ASCFLRule.regroup`: similarity, incentive
clustering, EM and split/merge, with the options at their earlier defaults, Algorithm 1 read
literally: Stage 1 every round, no warm-up, raw EM, the settled merge guard, each client's
update from its start model, the output layer's low-rank similarity) is applied to that
round's real client updates once per admission rule and similarity, without changing the
FedAvg state. Printed per case: clusters after the incentive
(:func:`fedprune.algorithms.ascfl.server.incentive_labels` on
:func:`fedprune.algorithms.ascfl.server.similarity_space`) and after split/merge, and their
ARI against the rotation groups.

Also printed: how well each similarity separates the groups by itself (mean cosine within and
between groups, and the ARI of average-linkage clustering with K = 4), which tells a
similarity that cannot see rotations from an admission test that breaks groups apart.

    python experiments/ascfl_admission_probe.py [--rounds 5] [--at 1,5] [--alpha 0.4]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import sys

import numpy as np
from sklearn.cluster import AgglomerativeClustering

from fedprune.algorithms.ascfl import metrics, server, similarity
from fedprune.algorithms.ascfl.compose import Evaluator, RoundUpdates
from fedprune.algorithms.ascfl.experiment import build_federation
from fedprune.algorithms.ascfl.incentive import ADMISSION_RULES
from fedprune.algorithms.ascfl.rules import ASCFLRule, FedAvgRule
from fedprune.configs.ascfl import ALGORITHM_1_LITERAL, ClusteredImageConfig
from fedprune.engine import per_client
from fedprune.models.spec import ModelSpec
from fedprune.workers import execution


def separation(sim: np.ndarray, groups: np.ndarray) -> str:
    """Mean cosine within / between groups and the ARI of average linkage with K = 4."""
    same = groups[:, None] == groups[None, :]
    off = ~np.eye(len(sim), dtype=bool)
    labels = AgglomerativeClustering(4, metric="precomputed", linkage="average").fit_predict(
        1 - sim
    )
    return (
        f"within {sim[same & off].mean():+.2f}, between {sim[~same].mean():+.2f}, "
        f"ARI(average linkage, K=4) {metrics.adjusted_rand_index(labels, groups):+.2f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="FedAvg rounds (5)")
    parser.add_argument("--at", default="1,5", help="rounds whose updates are probed (1,5)")
    parser.add_argument("--data-dir", default=None, help="as for train")
    parser.add_argument(
        "--alpha",
        type=float,
        default=None,
        help="Dirichlet label split with this alpha (default: IID labels, rotation only)",
    )
    parser.add_argument(
        "--similarity-only", action="store_true", help="skip the admission rules' regrouping"
    )
    args = parser.parse_args(argv)
    probe_at = {int(r) for r in args.at.split(",")}

    labels = {"labels": "iid"} if args.alpha is None else {"alpha": args.alpha}
    config = ClusteredImageConfig(method="ascfl", dataset="mnist", seed=0, **labels)
    # the AS-CFL options at their earlier defaults: Algorithm 1 read literally
    literal = dataclasses.replace(config, **ALGORITHM_1_LITERAL)
    fed = build_federation(config, args.data_dir)
    groups = np.asarray(fed.group_of_client)
    spec = ModelSpec(fed.federated.input_shape, 10, seed=config.seed, model=config.model)
    execution.install()
    update_round = per_client.build_update_round(spec, config.local_epochs, 1)
    evaluator = Evaluator(spec, fed)
    fedavg = FedAvgRule(config, spec)
    model = list(spec.initial_weights().trainable)
    everyone = {c: 0 for c in range(config.num_clients)}
    for t in range(1, args.rounds + 1):
        lr = config.learning_rate * config.lr_decay ** (t - 1)
        got = per_client.run_update_round(
            update_round, [model], lr, everyone, fed.clients, t, config.seed, config.batch_size
        )
        if t in probe_at:
            flat = np.stack([server.flatten(u) for u in got.updates])
            output = np.stack([server.flatten(u[-2:]) for u in got.updates])
            full = similarity.cosine_similarity_matrix(flat)
            print(f"round {t}: full-update cosine: {separation(full, groups)}")
            low = similarity.low_rank_similarity(output, config.explained_variance)
            print(
                f"round {t}: low-rank output-layer cosine (r={low.rank}): "
                f"{separation(low.similarity, groups)}"
            )
            for tensors, what in ((-4, "both dense layers"), (0, "all layers")):
                near = np.stack([server.flatten(u[tensors:]) for u in got.updates])
                wide = similarity.low_rank_similarity(near, config.explained_variance)
                print(
                    f"round {t}: low-rank cosine of {what} (r={wide.rank}): "
                    f"{separation(wide.similarity, groups)}"
                )
            if args.similarity_only:
                continue
            for rule_name, low_rank in itertools.product(ADMISSION_RULES, (True, False)):
                factorized = 2 if low_rank else None  # the output kernel and bias
                _, sim, _ = server.similarity_space(  # the incentive alone
                    got.updates, got.client_ids, factorized, literal.explained_variance
                )
                initial = server.incentive_labels(
                    sim,
                    got.examples.astype(float),
                    [model] * len(flat),
                    got,
                    evaluator.proxy,
                    positive_incentive=True,
                    admission=rule_name,
                    gain=literal.gain,
                    theta=literal.theta,
                )
                settings = dataclasses.replace(
                    literal, admission=rule_name, without=None if low_rank else "low-rank"
                )
                rule = ASCFLRule(settings, spec, low_rank_tensors=2)
                final = rule.regroup(
                    RoundUpdates(
                        t, [model], everyone, got, evaluator.proxy, np.random.default_rng(t)
                    )
                )
                labels = np.array([final.cluster_of[c] for c in range(config.num_clients)])
                print(
                    f"round {t}: {rule_name:15s} low-rank {'on ' if low_rank else 'off'}: "
                    f"incentive K={len(set(initial.tolist())):2d} "
                    f"ARI {metrics.adjusted_rand_index(initial, groups):+.2f}; "
                    f"after split/merge K={len(set(labels.tolist())):2d} "
                    f"ARI {metrics.adjusted_rand_index(labels, groups):+.2f}",
                    flush=True,
                )
        model = fedavg.regroup(  # FedAvg: one model, the weighted mean update
            RoundUpdates(t, [model], everyone, got, evaluator.proxy, np.random.default_rng(t))
        ).models[0]
    execution.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
