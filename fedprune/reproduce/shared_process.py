"""One long-lived Python process that runs ``fedprune`` commands one after another: the
runner's handle (the process itself is :mod:`fedprune.command_server`).

A ``fedprune train`` subprocess spends most of a short run starting up: importing
TensorFlow and TFF took 7 + 2.4 s on this 2-core machine for a k-FED run whose own work took
2.6 s (`fedprune reproduce fedhire` trains 680 such runs). A shared process imports them once
and then runs each command through :func:`fedprune.cli.main`, exactly as the command line
would (the same argument parsing, errors, TFF workers started and stopped per run, run
directory, exit status).

Protocol (one JSON object per line): the runner writes ``{"argv": [...], "log": path or
null}`` to the process's standard input; the process answers ``{"code": N}`` on the file
descriptor it was handed as standard output, which it keeps for answers only. During a
command, file descriptors 1 and 2 go to ``log`` (appended, as a subprocess's output
would), or, without a log, standard output to ``/dev/null`` and standard error where the
runner's goes (the progress bar). A command that ends in anything but 0 ends the process
too (an interrupted or failed run may have left TF or TFF in a state the next run should
not inherit); so does end of input.

A study opts in (:attr:`fedprune.reproduce.study.Study.shared_process`) only where a run in a
shared process was checked to give the same ``summary.json`` as one in a fresh process
(``tests/reproduce/test_shared_process.py``).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Sequence

from fedprune.interpreter import PYTHON

ANSWER = "code"
SERVER = "fedprune.command_server"  # run by name: the runner must not import it


class SharedProcess:
    """The runner's handle: start the process, send it commands, stop it."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [*PYTHON, "-m", SERVER],  # nothing imported from the current folder
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, argv: Sequence[str], log: str | None) -> int:
        """``fedprune ARGV`` there; its exit status. If the process ended without running
        it, the process's non-zero status, or 130 (interrupted) when its input was ended
        by :meth:`end_input` (a stopping runner)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write(json.dumps({"argv": list(argv), "log": log}) + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError):  # ValueError: input already ended
            return self.process.wait() or 130
        answer = self.process.stdout.readline()
        if not answer:  # it ended (e.g. Ctrl-C reached it between two commands)
            return self.process.wait() or 130
        return int(json.loads(answer)[ANSWER])

    def end_input(self) -> None:
        """No more commands: the process ends once its command (if any) is done."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            with contextlib.suppress(BrokenPipeError, ValueError):
                self.process.stdin.close()

    def close(self) -> None:
        """:meth:`end_input`, then wait for the process to end."""
        self.end_input()
        self.process.wait()
