"""Where TFF computations run: worker processes, their sandbox and TLS, the execution context.

* :mod:`~fedprune.workers.execution`: :func:`~fedprune.workers.execution.install` /
  ``shutdown``, the one place that starts workers and sets TFF's execution context;
* :mod:`~fedprune.workers.local`: one local ``worker_binary`` process, sandboxed in a private
  network namespace (or, with ``--unsafe-open-workers``, kept on loopback);
* :mod:`~fedprune.workers.sandbox`: the forwarder inside that namespace;
* :mod:`~fedprune.workers.channel`: the gRPC channel to a worker;
* :mod:`~fedprune.workers.remote`: ``fedprune worker``, a sandboxed worker behind mutual TLS.

The federated computations themselves (client work, rounds, aggregation) are in
:mod:`fedprune.engine`; nothing here knows about models or algorithms.
"""
