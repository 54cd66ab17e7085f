"""From Python, fedprune hides TensorFlow's C++ log lines as the command lines do (a CA-AFP run
printed about a hundred: grappler's "Starting new session", the oneDNN banner); a value you
set is yours; the command lines show them with ``--verbose``."""

from __future__ import annotations

import os
import subprocess
import sys

CODE = (
    "import os, sys, fedprune\n"
    "from fedprune import quiet\n"
    "print(os.environ.get('TF_CPP_MIN_LOG_LEVEL'))\n"
    "quiet.quiet_environment(verbose=sys.argv[1] == 'verbose')\n"
    "print(os.environ.get('TF_CPP_MIN_LOG_LEVEL'))\n"
)


def _levels(mode: str, **env: str) -> list[str]:
    base = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    done = subprocess.run(
        [sys.executable, "-c", CODE, mode], env={**base, **env}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_importing_fedprune_hides_native_lines_and_a_command_decides_after():
    assert _levels("quiet") == ["3", "3"]  # library default, then a command line's quiet
    assert _levels("verbose") == ["3", "0"]  # --verbose: everything TensorFlow says


def test_a_level_you_set_is_kept():
    assert _levels("verbose", TF_CPP_MIN_LOG_LEVEL="0") == ["0", "0"]
    assert _levels("quiet", TF_CPP_MIN_LOG_LEVEL="2") == ["2", "2"]
