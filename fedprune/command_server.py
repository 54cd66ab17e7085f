"""The process behind :class:`fedprune.reproduce.shared_process.SharedProcess`: reads one
``fedprune`` command per line, runs it through :func:`fedprune.cli.main`, answers its exit
status (the protocol is in :mod:`fedprune.reproduce.shared_process`). It imports the command
line, which imports the runner, so it sits above both, and the runner only starts it by
name."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from typing import IO

from fedprune.reproduce.shared_process import ANSWER


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


def _entry() -> None:
    """``python -m fedprune.command_server``, as ``SharedProcess`` starts it."""
    from fedprune.cli import exit_with
    from fedprune.engine import interrupts

    interrupts.install()  # SIGINT raises in the commands even if started with it ignored
    try:
        status = main()
    except KeyboardInterrupt:  # between two commands
        status = 130
    exit_with(status)  # after an interrupt without the slow final garbage collection


if __name__ == "__main__":
    _entry()
