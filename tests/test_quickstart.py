"""The README's quickstart prints what the README says it prints (real UCI-HAR, about 20 s).

The test takes the ``fedprune train`` command of the README's quickstart block, runs it with
the data found for the real-data tests and oneDNN off (``TF_ENABLE_ONEDNN_OPTS=0``: the
default on most CPUs, and what the README's printed block shows), and compares what it
prints with the README's ``text`` block after the quickstart: the title line up to the wall
time, and every headline line exactly. The ``Files in`` and ``Next`` lines name the run's
folder, which differs here, and are compared without it.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.real_data]


def quickstart() -> tuple[str, list[str]]:
    """(the quickstart's ``fedprune train`` command, the lines the README says it prints)."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("**Quickstart**") :]
    bash = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    joined = re.sub(r"\\\n\s*", " ", bash)
    command = next(
        re.sub(r"\s+#.*$", "", line).strip()
        for line in joined.splitlines()
        if line.startswith("fedprune train")
    )
    printed = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    return command, printed.rstrip("\n").splitlines()


def _comparable(lines: list[str], out: str) -> list[str]:
    """The lines with the wall time cut off the title and the run folder named ``RUN``."""
    lines = [line.replace(out, "RUN") for line in lines]
    lines[0] = re.sub(r": finished in .*$", ": finished in ...", lines[0])
    return lines


def test_the_quickstart_prints_what_the_readme_shows(real_data, tmp_path):
    command, shown = quickstart()
    words = shlex.split(command)
    readme_out = words[words.index("--out") + 1]
    words[words.index("--out") + 1] = str(tmp_path / "run")
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "fedprune.cli", *words[1:], "--data-dir", str(real_data)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    printed = done.stdout.rstrip("\n").splitlines()
    assert _comparable(printed, str(tmp_path / "run")) == _comparable(shown, readme_out)
