"""One long-lived Python process that runs ``fedprune`` commands one after another.

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
import os
import subprocess
import sys
import traceback
from collections.abc import Iterator, Sequence
from typing import IO

ANSWER = "code"


@contextlib.contextmanager
def _output_to(log: str | None) -> Iterator[None]:
    """File descriptors 1 and 2 to ``log`` (appended), or 1 to /dev/null without one."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    target = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if log else None
    try:
        if target is not None:
            os.dup2(target, 1)
            os.dup2(target, 2)
        else:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.close(devnull)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        if target is not None:
            os.close(target)


def run_command(argv: Sequence[str], log: str | None) -> int:
    """``fedprune ARGV`` in this process, its output to ``log``; its exit status (1 for an
    exception that escaped, whose traceback goes to ``log`` as a subprocess's would)."""
    from fedprune import cli

    with _output_to(log):
        try:
            return cli.main(list(argv))
        except SystemExit as exit_:  # argparse's errors
            return exit_.code if isinstance(exit_.code, int) else 1
        except Exception:
            traceback.print_exc()
            return 1


def serve(commands: IO[str], answers: IO[str]) -> int:
    """Run each command line of ``commands`` and answer its status on ``answers``; at end of
    input return 0, after the first command that did not end in 0 its status."""
    for line in commands:
        request = json.loads(line)
        code = run_command(request["argv"], request.get("log"))
        answers.write(json.dumps({ANSWER: code}) + "\n")
        answers.flush()
        if code != 0:
            return code
    return 0


def main() -> int:
    # standard output carries the answers only: keep it apart from what commands print
    answers = os.fdopen(os.dup(1), "w")
    return serve(sys.stdin, answers)


class SharedProcess:
    """The runner's handle: start the process, send it commands, stop it."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "fedprune.reproduce.shared_process"],
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


if __name__ == "__main__":
    from fedprune.cli import exit_with
    from fedprune.engine import interrupts

    interrupts.install()  # SIGINT raises in the commands even if started with it ignored
    try:
        status = main()
    except KeyboardInterrupt:  # between two commands
        status = 130
    exit_with(status)  # after an interrupt without the slow final garbage collection
