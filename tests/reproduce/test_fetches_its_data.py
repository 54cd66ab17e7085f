"""A reproduction on a machine whose data folder is empty starts by fetching its datasets, with
their checksums checked, as ``fedprune data`` does; nothing is trained before they are there.

The datasets' official addresses are pointed at a file server on this machine's loopback
address, serving the fixture archives, with the served files' sha256 as the published
checksum (so the checking path runs, not only the recording one).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import tarfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fedprune.cli import main
from fedprune.data import sources
from fedprune.reproduce import runner, table2
from tests.conftest import har_arrays, wisdm_text, write_uci_har


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The two datasets' archives behind http://127.0.0.1:PORT/, registered as their sources."""
    root = tmp_path / "served"
    root.mkdir()
    (tmp_path / "har").mkdir()
    har = write_uci_har(tmp_path / "har", *har_arrays(3, subjects=(1, 2, 3)), as_zip=True)
    (root / sources.SOURCES["uci_har"].download.filename).write_bytes(har.read_bytes())
    raw = wisdm_text(users=(1, 2, 3)).encode()
    with tarfile.open(root / sources.SOURCES["wisdm"].download.filename, "w:gz") as tar:
        member = tarfile.TarInfo("WISDM_ar_v1.1/WISDM_ar_v1.1_raw.txt")
        member.size = len(raw)
        tar.addfile(member, io.BytesIO(raw))
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=root))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    for name in table2.DATASETS:
        source = sources.SOURCES[name]
        body = (root / source.download.filename).read_bytes()
        download = dataclasses.replace(
            source.download,
            url=f"http://127.0.0.1:{port}/{source.download.filename}",
            sha256=hashlib.sha256(body).hexdigest(),
        )
        monkeypatch.setitem(sources.SOURCES, name, dataclasses.replace(source, download=download))
    yield root
    server.shutdown()
    server.server_close()


class _Trained(Exception):
    """Raised where the reproduction would start training."""


def test_reproduce_table2_fetches_both_datasets_before_training(served, tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()

    def before_training(*args: object, **kwargs: object) -> None:
        for name in table2.DATASETS:  # both are here, checked, before the first run
            source = sources.SOURCES[name]
            path = data / source.folder / source.download.filename
            assert path.read_bytes() == (served / source.download.filename).read_bytes()
        raise _Trained

    monkeypatch.setattr(runner, "run_jobs", before_training)
    with pytest.raises(_Trained):
        main(["reproduce", "table2", "--quick", "--data-dir", str(data), "--out", str(tmp_path)])


def test_a_download_that_does_not_match_its_checksum_stops_before_training(
    served, tmp_path, monkeypatch, capsys
):
    (served / sources.SOURCES["wisdm"].download.filename).write_bytes(b"not the archive")
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setattr(runner, "run_jobs", lambda *a, **k: pytest.fail("trained"))
    assert main(["reproduce", "table2", "--quick", "--data-dir", str(data)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(err) == 1 and "sha256" in err[0], err
    assert not list((data / "wisdm").glob("*.tar.gz"))  # nothing half-fetched is kept
