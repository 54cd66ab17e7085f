"""Copy the record of each finished run of a reproduction into ``experiments/measured/``.

    python experiments/archive_runs.py OUT STUDY

For every run directory under ``OUT`` (a ``fedprune reproduce STUDY --out OUT`` folder) that
holds a ``summary.json``, copies its ``config.json``, ``summary.json`` and ``metrics.csv`` (no
weights) to ``experiments/measured/STUDY/`` under the same relative path; and for every export
folder (one holding an ``export_report.json``, as ``fedprune reproduce device`` makes under
``exports/``) its report (``.json``, ``.md``) and each exported file's ``.json`` record (its
shapes, arena and device measurements; no model files), and the device study's
``litert_times.json``. These are the runs behind the docs'
full-study tables; ``experiments/measured/README.md`` says how to re-render the tables from
them or resume a reproduction with them done.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

RECORD = ("config.json", "summary.json", "metrics.csv")
EXPORT_REPORT = ("export_report.json", "export_report.md")
TIMES = "litert_times.json"  # fedprune.reproduce.device.TIMES
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
    for report in sorted(out.rglob(EXPORT_REPORT[0])):
        _archive_export(report.parent, dest / report.parent.relative_to(out))
    for times in sorted(out.rglob(TIMES)):  # the device study's LiteRT pass over every file
        (dest / times.parent.relative_to(out)).mkdir(parents=True, exist_ok=True)
        shutil.copy2(times, dest / times.relative_to(out))
    return copied


def _archive_export(folder: Path, target: Path) -> None:
    """The report of the export ``folder`` and the ``.json`` record beside each file it
    lists (what a study reads back from an export), under ``target``."""
    entries = json.loads((folder / EXPORT_REPORT[0]).read_text())
    records = [Path(e["path"]).with_suffix(".json") for e in entries if "path" in e]
    for name in (*EXPORT_REPORT, *records):
        if (folder / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(folder / name, target / name)


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
