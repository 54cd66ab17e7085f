import pytest

from fedprune.data import cache, sources
from fedprune.data.registry import load_federated, load_windows
from fedprune.errors import DataError


def test_data_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("FEDPRUNE_DATA_DIR", str(tmp_path / "env"))
    assert sources.resolve_data_dir(tmp_path / "arg") == tmp_path / "arg"
    assert sources.resolve_data_dir() == tmp_path / "env"
    monkeypatch.delenv("FEDPRUNE_DATA_DIR")
    assert str(sources.resolve_data_dir()) == "data"


def test_missing_files_without_download_is_one_clear_error(tmp_path):
    with pytest.raises(DataError) as err:
        sources.locate("wisdm", tmp_path, download=False)
    message = str(err.value)
    assert "WISDM_ar_v1.1_raw.txt" in message and "fordham.edu" in message
    assert "\n" not in message


def test_failed_download_names_url_and_leaves_nothing(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network unreachable")

    monkeypatch.setattr(sources.urllib.request, "urlopen", refuse)
    with pytest.raises(DataError, match="archive.ics.uci.edu.*network unreachable"):
        sources.locate("uci_har", tmp_path)
    assert list((tmp_path / "uci_har").iterdir()) == []


def test_checksum_mismatch_is_rejected(tmp_path):
    f = tmp_path / "x.part"
    f.write_bytes(b"abc")
    download = sources.Download("http://example/x", "x.zip", sha256="0" * 64)
    with pytest.raises(DataError, match="does not match"):
        sources.verify_download(f, download, tmp_path / "x.zip")
    assert not f.exists()


def test_first_download_records_checksum_then_enforces_it(tmp_path):
    download = sources.Download("http://example/x", "x.zip", sha256=None)
    f = tmp_path / "a.part"
    f.write_bytes(b"abc")
    sources.verify_download(f, download, tmp_path / "x.zip")
    assert (tmp_path / "x.zip.sha256").read_text().startswith(sources.sha256_of(f))
    g = tmp_path / "b.part"
    g.write_bytes(b"different")
    with pytest.raises(DataError, match="does not match"):
        sources.verify_download(g, download, tmp_path / "x.zip")


def test_unknown_dataset():
    with pytest.raises(DataError, match="unknown dataset 'mnist2'"):
        sources.locate("mnist2")


def test_cache_roundtrip_and_invalidation(fixture_data_dir, capsys):
    first = load_windows("wisdm", fixture_data_dir, download=False)
    assert "6 malformed" in capsys.readouterr().err
    files = list(cache.cache_dir().glob("wisdm-*.npz"))
    assert len(files) == 1
    again = load_windows("wisdm", fixture_data_dir)
    assert "6 malformed" in capsys.readouterr().err  # the note is repeated from the cache
    assert (again.x == first.x).all()
    # a modified source file gets a new cache entry
    raw = fixture_data_dir / "wisdm" / "WISDM_ar_v1.1_raw.txt"
    raw.write_text(raw.read_text() + "2,Sitting,115,2.5,2.6,2.7;\n")
    load_windows("wisdm", fixture_data_dir)
    assert len(list(cache.cache_dir().glob("wisdm-*.npz"))) == 2


def test_load_federated_from_fixture(fixture_data_dir):
    fed = load_federated("uci_har", seed=0, data_dir=fixture_data_dir, verbose=False)
    assert fed.num_clients == 6 and fed.input_shape == (128, 9)
    assert all(sorted(set(c.y_test.tolist())) == list(range(6)) for c in fed.clients)
