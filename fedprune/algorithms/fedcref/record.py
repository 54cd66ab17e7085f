"""The summary of a finished FedCRef run, made from its metrics rows (one per iteration,
:class:`~fedprune.algorithms.fedcref.experiment.FedCRefIterations`), its final state and its
clients.

The summary holds, in this order: what every run records (``method``, ``dataset``, then
:func:`described`'s ``split``, ``init`` and ``dirtiness``, then ``seed``), the numbers of
:data:`NUMBERS`, the ``deploy`` manifest, with ``--local-k auto`` the chosen K_i
(``local_k_chosen``; with classes also ``local_k_mean_abs_diff`` and
``local_k_exact_fraction``, against each client's number of classes), and for your table its
``client_ids`` in client order. Your table's summary has no ``split``; a run without classes
``y`` has none of the label-based numbers (:func:`label_numbers`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from fedprune.algorithms.fedcref.algorithm import FedCRefState
from fedprune.algorithms.fedcref.clients import Federation, RunClients
from fedprune.algorithms.fedcref.community_training import deploy_manifest
from fedprune.algorithms.fedcref.evaluation import mean_client_acc
from fedprune.algorithms.fedcref.local_k import comparison
from fedprune.configs.fedcref import AUTO, FedCRefRunConfig

NUMBERS = (
    "num_clients",
    "mean_k",
    "acc_init",
    "acc_final",
    "communities",
    "true_categories",
    "wrong_assoc_pct",
    "clusters_total",
    "isolated_start",
    "isolated_end",
    "iterations",
    "stop_reason",
    "wall_s",
)
"""The summary's numbers after its head, in order (those :func:`label_numbers` gives only
with classes)."""


def described(config: FedCRefRunConfig, federation: Federation) -> dict:
    """The entries that describe the data of a run of ``config`` on ``federation`` (after
    ``dataset``): the simulated system's ``split`` (your table has none), the ``init`` and
    its ``dirtiness`` (``None`` for ``kmeans-ae``)."""
    split = {} if federation.yours else {"split": config.split}
    dirtiness = config.dirtiness if config.init == "dirty" else None
    return {**split, "init": config.init, "dirtiness": dirtiness}


def label_numbers(clients: RunClients, last: Mapping) -> dict:
    """The summary's numbers that need the classes (none without them): ``acc_init``, the
    mean client ACC of the initial clusterings, and of the last iteration's row ``last`` its
    ``acc`` (``acc_final``), the true categories and the wrong associations."""
    federation = clients.federation
    labels = federation.labels
    if labels is None:
        return {}
    return {
        "acc_init": round(mean_client_acc(labels, clients.initial), 6),
        "acc_final": float(last["acc"]),
        "true_categories": federation.true_categories,
        "wrong_assoc_pct": float(last["wrong_assoc_pct"]),
    }


def local_k_numbers(federation: Federation) -> dict:
    """``--local-k auto``'s entries: the chosen K_i and, with classes, how they compare with
    each client's number of classes
    (:func:`~fedprune.algorithms.fedcref.local_k.comparison`)."""
    numbers = {"local_k_chosen": list(federation.ks)}
    if federation.class_counts is not None:
        agreement = comparison(federation.ks, federation.class_counts)
        numbers["local_k_mean_abs_diff"] = agreement["mean_abs_diff"]
        numbers["local_k_exact_fraction"] = agreement["exact_fraction"]
    return numbers


def run_summary(
    head: Mapping,
    config: FedCRefRunConfig,
    clients: RunClients,
    final: FedCRefState,
    rows: Sequence[Mapping],
) -> dict:
    """The summary (module text) of the run of ``config`` on ``clients`` that ended in
    ``final`` after the metrics ``rows``; ``head``: what every run records, with
    :func:`described`'s entries."""
    federation, first, last = clients.federation, rows[0], rows[-1]
    numbers = {
        "num_clients": len(federation.xs),
        "mean_k": float(np.mean(federation.ks)),
        "communities": int(last["communities"]),
        "clusters_total": int(first["clusters"]),
        "isolated_start": int(first["isolated"]),
        "isolated_end": int(last["isolated"]),
        "iterations": int(last["iteration"]),
        "stop_reason": final.stop_reason,
        "wall_s": float(last["wall_s"]),
        **label_numbers(clients, last),
    }
    summary = {
        **head,
        **{name: numbers[name] for name in NUMBERS if name in numbers},
        "deploy": deploy_manifest(config, federation.input_dim),
    }
    if config.local_k == AUTO:
        summary.update(local_k_numbers(federation))
    if federation.yours:
        summary["client_ids"] = federation.ids
    return summary
