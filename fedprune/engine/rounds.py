"""Running rounds of a TFF learning process over sampled clients.

Client sampling and shuffling are pure functions of ``(seed, round)``: a resumed run samples
exactly the clients and orders the windows exactly as an uninterrupted run would.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

import numpy as np
import tensorflow_federated as tff

from fedprune.data.partition import ClientData
from fedprune.engine import interrupts
from fedprune.engine.datasets import round_seed
from fedprune.engine.local_loop import client_tensors
from fedprune.errors import ConfigError, FedpruneError
from fedprune.workers import execution

T = TypeVar("T")


def sample_clients(
    client_ids: Sequence[int], per_round: int, seed: int, round_num: int
) -> list[int]:
    """``per_round`` distinct client ids drawn uniformly for this round (all when ``per_round``
    is their number; never more: the runs refuse a larger ``--clients-per-round`` before
    training, with the clients there are)."""
    if per_round < 1:
        raise ConfigError(f"clients per round must be >= 1, got {per_round}")
    ids = np.asarray(sorted(client_ids))
    if per_round > len(ids):
        raise ConfigError(
            f"--clients-per-round must be at most {len(ids)} (the clients), got {per_round}"
        )
    if per_round == len(ids):
        return ids.tolist()
    rng = np.random.default_rng([seed, round_num])
    return np.sort(rng.choice(ids, size=per_round, replace=False)).tolist()


def run_round(
    process: tff.learning.templates.LearningProcess,
    state: object,
    clients: Sequence[ClientData],
    round_num: int,
    seed: int,
    batch_size: int,
) -> tff.learning.templates.LearningProcessOutput:
    """One call of ``process.next`` on these clients' training data for ``round_num``;
    :class:`TrainingDiverged` if the aggregated loss or model is not finite."""
    data = [
        client_tensors(c, batch_size, round_seed(seed, round_num, c.client_id)) for c in clients
    ]
    output = call_interruptibly(lambda: process.next(state, data))
    check_finite_round(process, output, round_num, [c.client_id for c in clients])
    return output


class TrainingDiverged(FedpruneError):
    """A round's aggregated loss or model weights are not finite (nan or inf)."""


def check_finite_round(
    process: tff.learning.templates.LearningProcess,
    output: tff.learning.templates.LearningProcessOutput,
    round_num: int,
    client_ids: Sequence[int],
) -> None:
    """Stop a run whose round produced a non-finite aggregate, before anything of the round is
    saved: the checkpoint keeps the last finite state, so the run can resume after a fix.

    Checked on what the server receives: the aggregated training loss (the clients' mean) and
    the new model weights. A single client's non-finite update makes both non-finite, so the
    message names the clients that trained in the round."""
    train = output.metrics.get("client_work", {}).get("train", {})
    loss = float(train["train_loss"]) if "train_loss" in train else 0.0
    check_finite(round_num, client_ids, loss, process.get_model_weights(output.state).trainable)


def check_finite(
    round_num: int, client_ids: Sequence[int], loss: float, weights: Sequence[np.ndarray]
) -> None:
    """:class:`TrainingDiverged` naming the round and its clients unless the aggregated
    ``loss`` and every new weight are finite (see :func:`check_finite_round`)."""
    bad_weights = not all(np.isfinite(np.asarray(w)).all() for w in weights)
    if np.isfinite(loss) and not bad_weights:
        return
    what = ", ".join(
        part
        for part, bad in ((f"train loss {loss}", not np.isfinite(loss)), ("weights", bad_weights))
        if bad
    )
    raise TrainingDiverged(
        f"round {round_num}: training diverged (non-finite {what}) on clients "
        f"{', '.join(str(i) for i in sorted(client_ids))}; nothing of this round was saved: "
        "lower --lr or check those clients' data, then run the same command to resume"
    )


def cluster_quota(sizes: Sequence[int], per_round: int) -> list[int]:
    """Clients per cluster for one round: proportional to cluster size (largest remainder),
    at least one per cluster, at most the cluster's size; sums to ``per_round`` when
    ``per_round >= len(sizes)``."""
    sizes = np.asarray(sizes, dtype=np.int64)
    if per_round < 1 or np.any(sizes < 1):
        raise ConfigError("clients per round and every cluster size must be >= 1")
    quota = np.ones(len(sizes), dtype=np.int64)
    spare = per_round - len(sizes)
    while spare > 0 and np.any(quota < sizes):
        share = (per_round * sizes / sizes.sum()) - quota
        share[quota >= sizes] = -np.inf
        quota[int(np.argmax(share))] += 1
        spare -= 1
    return quota.tolist()


def sample_by_cluster(
    cluster_of: Mapping[int, int], per_round: int, seed: int, round_num: int
) -> dict[int, list[int]]:
    """{cluster: sorted client ids} for this round, with :func:`cluster_quota` per cluster."""
    clusters = sorted(set(cluster_of.values()))
    members = {c: sorted(i for i, k in cluster_of.items() if k == c) for c in clusters}
    quota = cluster_quota([len(members[c]) for c in clusters], per_round)
    chosen = {}
    for c, q in zip(clusters, quota):
        rng = np.random.default_rng([seed, round_num, c])
        chosen[c] = np.sort(rng.choice(members[c], size=q, replace=False)).tolist()
    return chosen


def run_rounds_concurrently(
    jobs: Sequence[tuple[tff.learning.templates.LearningProcess, object, Sequence[ClientData]]],
    round_num: int,
    seed: int,
    batch_size: int,
) -> list[tff.learning.templates.LearningProcessOutput]:
    """:func:`run_round` for several (process, state, clients) jobs at once, e.g. one per
    cluster; outputs in job order.

    The TFF worker executes the calls concurrently, so a one-client cluster does not leave
    the other cores idle while it trains. Each call is independent: results do not depend
    on timing.
    """
    return call_concurrently(
        [
            functools.partial(run_round, process, state, clients, round_num, seed, batch_size)
            for process, state, clients in jobs
        ]
    )


def call_interruptibly(call: Callable[[], T]) -> T:
    """``call()`` (a TFF call) so that Ctrl-C ends the caller at once
    (:func:`call_concurrently` with one call)."""
    return call_concurrently([call])[0]


def call_concurrently(calls: Sequence[Callable[[], T]]) -> list[T]:
    """Run independent TFF calls (e.g. one per cluster or community) in threads; results in
    call order.

    TFF's context stack is thread-local, so the current context is installed in each thread;
    the TFF worker then executes the calls concurrently, and a small job does not leave the
    other cores idle while it trains. Results do not depend on timing.

    The threads are daemons and the caller waits on an event, never on a thread join: on
    Ctrl-C (or any error in one call) the caller raises at once, while calls still blocked in
    gRPC on a worker that the interrupt has killed are abandoned instead of joined (a
    ``ThreadPoolExecutor`` would join them on exit and hang forever). An error in a call is
    re-raised in the caller. A single call runs in a thread too: inline, the caller would wait
    in TFF's ``future.result()``, which Ctrl-C cannot end while a dead worker is retried.
    While it waits, the caller raises a ``KeyboardInterrupt`` that Python dropped (raised
    inside a garbage-collector callback, see :mod:`fedprune.engine.interrupts`) and checks
    that its local workers live (:func:`execution.check_workers`): a worker that Ctrl-C or a
    crash ended would leave the call waiting forever.
    """
    interrupts.raise_if_received()  # one TensorFlow swallowed since: not forgotten below
    interrupts.install()
    context = tff.framework.get_context_stack().current
    results: list = [None] * len(calls)
    errors: list[BaseException] = []
    pending = [len(calls)]
    lock, finished = threading.Lock(), threading.Event()

    def run(i: int, call: Callable[[], T]) -> None:
        try:
            with tff.framework.get_context_stack().install(context):
                results[i] = call()
        except BaseException as err:  # noqa: BLE001 (re-raised in the caller)
            with lock:
                errors.append(err)
            finished.set()
            return
        with lock:
            pending[0] -= 1
            if pending[0] == 0:
                finished.set()

    for i, call in enumerate(calls):
        threading.Thread(target=run, args=(i, call), daemon=True, name=f"tff-call-{i}").start()
    while not finished.wait(0.5):  # a timed wait keeps the main thread interruptible
        interrupts.raise_if_dropped()
        execution.check_workers()
    if errors:
        raise errors[0]
    return results
