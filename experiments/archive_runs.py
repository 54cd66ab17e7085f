"""Copy the record of each finished run of a reproduction into ``experiments/measured/``.

    python experiments/archive_runs.py OUT STUDY

For every run directory under ``OUT`` (a ``fedprune reproduce STUDY --out OUT`` folder) that
holds a ``summary.json``, copies its ``config.json``, ``summary.json`` and ``metrics.csv`` (no
weights) to ``experiments/measured/STUDY/`` under the same relative path. These are the runs
behind the docs' full-study tables; ``experiments/measured/README.md`` says how to re-render
the tables from them or resume a reproduction with them done.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

RECORD = ("config.json", "summary.json", "metrics.csv")
MEASURED = Path(__file__).resolve().parent / "measured"


def archive(out: Path, dest: Path) -> int:
    """Copy the record of each finished run under ``out`` to the same relative path under
    ``dest``; unfinished runs (no ``summary.json``) are left out. Returns how many runs."""
    copied = 0
    for summary in sorted(out.rglob("summary.json")):
        run = summary.parent
        target = dest / run.relative_to(out)
        target.mkdir(parents=True, exist_ok=True)
        for name in RECORD:
            if (run / name).exists():
                shutil.copy2(run / name, target / name)
        copied += 1
    return copied


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not Path(argv[0]).is_dir():
        print(
            "usage: python experiments/archive_runs.py OUT STUDY (OUT: the --out folder of "
            "`fedprune reproduce STUDY`)",
            file=sys.stderr,
        )
        return 2
    dest = MEASURED / argv[1]
    print(f"{archive(Path(argv[0]), dest)} finished runs -> {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
