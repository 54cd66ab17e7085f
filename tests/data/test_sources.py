import io
import json

import pytest

from fedprune.data import cache, sources
from fedprune.data.registry import load_federated, load_windows
from fedprune.errors import DataError
from tests.conftest import wisdm_text


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


# --- no open doors: the data directory, recorded and published checksums ------------------


def _no_network(monkeypatch):
    def refuse(*args, **kwargs):
        pytest.fail("nothing may be downloaded")

    monkeypatch.setattr(sources.urllib.request, "urlopen", refuse)


@pytest.mark.parametrize("download", [True, False])
def test_missing_data_dir_is_refused_and_not_created(tmp_path, monkeypatch, download):
    _no_network(monkeypatch)
    typo = tmp_path / "dtaa"
    with pytest.raises(DataError) as err:
        sources.locate("uci_har", typo, download=download)
    assert str(err.value) == f"data directory {typo} does not exist; create it or fix --data-dir"
    assert not typo.exists()


def test_missing_data_dir_from_environment_or_default(tmp_path, monkeypatch):
    _no_network(monkeypatch)
    monkeypatch.setenv(sources.ENV_DATA_DIR, str(tmp_path / "nope"))
    with pytest.raises(DataError, match=r"nope \(from \$FEDPRUNE_DATA_DIR\) does not exist"):
        sources.locate("wisdm")
    monkeypatch.delenv(sources.ENV_DATA_DIR)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError, match=r"data directory data \(the default ./data\) does not"):
        load_windows("wisdm")
    assert not (tmp_path / "nope").exists() and not (tmp_path / "data").exists()


def test_data_dir_that_is_a_file(tmp_path):
    f = tmp_path / "data.txt"
    f.write_text("")
    with pytest.raises(DataError, match=rf"data directory {f} is not a directory; fix"):
        sources.locate("wisdm", f)


def test_images_refuse_missing_data_dir(tmp_path, monkeypatch):
    from fedprune.data.images import load_images

    _no_network(monkeypatch)
    with pytest.raises(DataError, match="does not exist; create it or fix --data-dir"):
        load_images("mnist", data_dir=tmp_path / "missing")
    assert not (tmp_path / "missing").exists()


def test_fetch_creates_only_the_dataset_folder(tmp_path):
    with pytest.raises(DataError, match=r"data directory .*absent does not exist"):
        sources.fetch(sources.get_source("wisdm"), tmp_path / "absent" / "wisdm")
    assert not (tmp_path / "absent").exists()


def test_download_goes_into_the_existing_data_dir(tmp_path, monkeypatch):
    served = b"1,Walking,1,0.1,0.2,0.3;\n"
    monkeypatch.setattr(sources.urllib.request, "urlopen", lambda url, timeout: io.BytesIO(served))
    path = sources.locate("wisdm", tmp_path)
    assert path == tmp_path / "wisdm" / "WISDM_ar_latest.tar.gz" and path.read_bytes() == served
    assert sources.read_record(sources.record_path(path)) == sources.sha256_of(path)


def _recorded_wisdm(data_dir, tamper: bool):
    raw = data_dir / "wisdm" / "WISDM_ar_v1.1_raw.txt"
    (data_dir / "wisdm").mkdir()
    raw.write_text(wisdm_text())
    sources.record_path(raw).write_text(f"{sources.sha256_of(raw)}  {raw.name}\n")
    if tamper:
        raw.write_text(wisdm_text(seed=1))
    return raw


def test_recorded_sha256_is_checked_at_every_use(tmp_path):
    raw = _recorded_wisdm(tmp_path, tamper=False)
    assert sources.locate("wisdm", tmp_path, download=False) == raw
    assert load_windows("wisdm", tmp_path, download=False, verbose=False).x.shape[1:] == (200, 3)


def test_recorded_sha256_mismatch_is_refused(tmp_path):
    raw = _recorded_wisdm(tmp_path, tamper=True)
    with pytest.raises(DataError) as err:
        load_windows("wisdm", tmp_path, download=False)
    message = str(err.value)
    assert message.startswith(f"{raw}: the file changed since it was downloaded (sha256 ")
    assert f" in {raw}.sha256)" in message and "fordham.edu" in message
    assert "\n" not in message
    assert list(cache.cache_dir().glob("*.npz")) == []  # nothing parsed, nothing cached


def test_unreadable_record_is_refused_not_ignored(tmp_path):
    raw = _recorded_wisdm(tmp_path, tamper=False)
    sources.record_path(raw).write_text("garbage\n")
    with pytest.raises(DataError, match=rf"{raw}\.sha256: not a sha256 record"):
        sources.locate("wisdm", tmp_path)


def test_directory_candidates_are_not_hashed(tmp_path):
    folder = tmp_path / "uci_har" / "UCI HAR Dataset"
    folder.mkdir(parents=True)
    (tmp_path / "uci_har" / "UCI HAR Dataset.sha256").write_text("0" * 64 + "\n")
    assert sources.locate("uci_har", tmp_path, download=False) == folder


@pytest.mark.real_data
def test_published_checksums_equal_the_manifest(real_data):
    """The official files' sha256 in shared/data/manifest.json are the registered ones; the
    manifest has none for the official UCI-HAR or WISDM archives (only reconstructions)."""
    from fedprune.data import images

    manifest = real_data / "manifest.json"
    if not manifest.exists():
        pytest.skip("no manifest.json beside the real data")
    listed = {f["path"]: f["sha256"] for f in json.loads(manifest.read_text())["files"]}
    for (name, filename), digest in images._SHA256.items():
        assert listed[f"{name}/{filename}"] == digest
    for source in sources.SOURCES.values():
        assert f"{source.folder}/{source.download.filename}" not in listed
        assert source.download.sha256 is None
