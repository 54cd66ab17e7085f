"""``experiments/archive_runs.py`` keeps what a study reads back from its exports (the
report and each file's ``.json`` record), so a resumed ``fedprune reproduce device`` finds a
finished run exported, without the model files."""

from __future__ import annotations

import json

from tests.reproduce.test_measured import _archive_module


def test_an_export_keeps_its_report_and_records_but_no_model_files(tmp_path):
    out, dest = tmp_path / "out", tmp_path / "dest"
    export = out / "exports" / "a-s0"
    (export / "client_1").mkdir(parents=True)
    (export / "client_1" / "model_int8.tflite").write_bytes(b"model")
    (export / "client_1" / "model_int8.json").write_text('{"compaction": null}')
    (export / "client_1" / "micro").mkdir()
    (export / "client_1" / "micro" / "model.cc").write_text("// weights")
    entries = [{"client": 1, "format": "int8", "path": "client_1/model_int8.tflite"}]
    (export / "export_report.json").write_text(json.dumps(entries))
    (export / "export_report.md").write_text("# report\n")
    unfinished = out / "exports" / "b-s0"
    unfinished.mkdir()
    (unfinished / "partial.tflite").write_bytes(b"half")

    assert _archive_module().archive(out, dest) == 0  # no run finished: only exports
    kept = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert kept == [
        "exports/a-s0/client_1/model_int8.json",
        "exports/a-s0/export_report.json",
        "exports/a-s0/export_report.md",
    ]
    assert json.loads((dest / kept[1]).read_text()) == entries
