"""The peer of fedprune's FedAvg round: a tuned multi-process plain-Keras client loop.

What a tuned Flower-style deployment of the same round does, without Flower: a pool of
long-lived worker processes (``multiprocessing`` spawn, one per core by default), each of
which builds and compiles its Keras model **once**; for each client it is given it sets the
global weights, resets the Adam state, runs ``fit`` for the local epochs and returns the
weights and its number of examples. The server averages the returned models weighted by
examples (FedAvg, Eq. 2), in float64.

A client's data is sent to a worker the first time that worker trains it and is kept there
(a Flower client holds its own data), so a round moves only weights. Clients are dealt to
the workers round-robin in the order given; each worker trains its share one after another.

Each worker runs TensorFlow with one intra-op and one inter-op thread (one client per core,
as fedprune's TFF workers and the zero-overhead round do).

``model_fn`` and ``loss_fn`` must be picklable (module-level functions,
``functools.partial`` of them, or bound methods of picklable objects such as a
:class:`fedprune.models.spec.ModelSpec`).
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable, Sequence

import numpy as np

THREAD_VARS = {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}


def _worker(conn, model_fn, loss_fn, adam: dict) -> None:  # noqa: ANN001
    """A worker's life: build and compile once, then train clients until told to stop."""
    import tensorflow as tf

    model = model_fn()
    model.compile(optimizer=tf.keras.optimizers.Adam(**adam), loss=loss_fn())
    data: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    conn.send("ready")
    while True:
        message = conn.recv()
        if message is None:
            break
        weights, jobs, epochs, batch_size = message
        results = []
        for client_id, seed, arrays in jobs:
            if arrays is not None:
                data[client_id] = arrays
            x, y = data[client_id]
            model.set_weights(weights)
            for variable in model.optimizer.variables:  # a fresh Adam per client
                variable.assign(tf.zeros_like(variable))
            tf.keras.utils.set_random_seed(seed)  # the shuffling and dropout of this client
            model.fit(x, y, epochs=epochs, batch_size=batch_size, shuffle=True, verbose=0)
            results.append((client_id, model.get_weights(), len(y)))
        conn.send(results)
    conn.close()


def weighted_average(models: Sequence[Sequence[np.ndarray]], sizes: Sequence[int]) -> list:
    """sum_k n_k w_k / sum_k n_k per tensor (float64 sums), in the models' dtype."""
    n = np.asarray(sizes, np.float64)
    return [
        (sum(nk * np.asarray(m[i], np.float64) for nk, m in zip(n, models)) / n.sum()).astype(
            np.asarray(models[0][i]).dtype
        )
        for i in range(len(models[0]))
    ]


class PeerPool:
    """``processes`` long-lived Keras workers; :meth:`round` runs one FedAvg round on them."""

    def __init__(
        self,
        model_fn: Callable,
        loss_fn: Callable,
        processes: int | None = None,
        learning_rate: float = 1e-3,
    ):
        self.processes = processes or len(os.sched_getaffinity(0)) or 1
        ctx = mp.get_context("spawn")
        adam = {"learning_rate": learning_rate}
        saved = {k: os.environ.get(k) for k in THREAD_VARS}
        os.environ.update(THREAD_VARS)  # the spawned interpreters read them at start
        try:
            self._conns, self._procs = [], []
            for _ in range(self.processes):
                parent, child = ctx.Pipe()
                proc = ctx.Process(target=_worker, args=(child, model_fn, loss_fn, adam))
                proc.daemon = True
                proc.start()
                child.close()
                self._conns.append(parent)
                self._procs.append(proc)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        for conn in self._conns:
            if conn.recv() != "ready":
                raise RuntimeError("a peer worker did not start")
        self._sent: list[set[int]] = [set() for _ in self._conns]

    def round(
        self,
        weights: Sequence[np.ndarray],
        clients: Sequence[tuple[int, np.ndarray, np.ndarray]],
        seeds: Sequence[int],
        epochs: int,
        batch_size: int,
    ) -> list[np.ndarray]:
        """One round: ``clients`` as (id, x, y), each trained from ``weights`` with its seed;
        returns the example-weighted mean of the trained models."""
        weights = [np.asarray(w) for w in weights]
        for w, conn in enumerate(self._conns):
            jobs = []
            for (cid, x, y), seed in list(zip(clients, seeds))[w :: len(self._conns)]:
                arrays = None if cid in self._sent[w] else (x, y)
                self._sent[w].add(cid)
                jobs.append((cid, int(seed), arrays))
            conn.send((weights, jobs, epochs, batch_size))
        results = [r for conn in self._conns for r in conn.recv()]
        return weighted_average([r[1] for r in results], [r[2] for r in results])

    def close(self) -> None:
        for conn in self._conns:
            try:
                conn.send(None)
                conn.close()
            except OSError:
                pass
        for proc in self._procs:
            proc.join(10)
            if proc.is_alive():
                proc.terminate()
                proc.join()

    def __enter__(self) -> PeerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
