"""The window cache trusts only what this user wrote (:mod:`fedprune.data.cache`): a folder
or entry of another user, or one others can write, is not used; one note says why and the
source is parsed instead. The planting user is a real second uid (``setpriv`` to 65534,
"nobody") where the tests run as root; the mode cases need no second user."""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from fedprune.data import cache, sources
from fedprune.data.registry import load_windows

NOBODY = 65534


def _as_nobody(*command: str, stdin: bytes | None = None) -> None:
    """Run ``command`` as uid/gid 65534 with no supplementary groups (a second local user)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to act as a second user (setpriv --reuid)")
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv (util-linux) to act as a second user")
    prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    subprocess.run([*prefix, *command], input=stdin, check=True, capture_output=True)


def _poison(data_dir: Path) -> tuple[str, bytes]:
    """The name of the UCI-HAR entry for ``data_dir`` (its key is computable from the zip's
    stat, as any local user can) and a well-formed entry of random windows with the
    planter's text as its parse report."""
    source = sources.locate("uci_har", data_dir, download=False)
    name = f"uci_har-{cache.cache_key(source, {})}.npz"
    rng = np.random.default_rng(1)
    buffer = io.BytesIO()
    np.savez(
        buffer,
        x=rng.normal(size=(360, 128, 9)).astype(np.float32),
        y=rng.integers(0, 6, 360),
        subject=np.repeat(np.arange(1, 7), 60),
        class_names=np.array([f"c{i}" for i in range(6)]),
        channel_names=np.array([f"ch{i}" for i in range(9)]),
        name=np.array("uci_har"),
        note=np.array("PLANTED parse report"),
    )
    return name, buffer.getvalue()


@pytest.fixture
def shared_root():
    """A folder every user can reach (pytest's own temporary tree is private to root)."""
    root = Path(tempfile.mkdtemp(prefix="fedprune-shared-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _fresh(data_dir: Path):
    return load_windows("uci_har", data_dir, download=False, use_cache=False, verbose=False)


def _loaded_with_notes(data_dir: Path, capsys) -> tuple[object, list[str]]:
    capsys.readouterr()
    data = load_windows("uci_har", data_dir, download=False, verbose=True)
    lines = capsys.readouterr().err.splitlines()
    return data, [line for line in lines if line.startswith("fedprune: note:")]


def _same(a, b) -> None:
    np.testing.assert_array_equal(a.x, b.x)
    np.testing.assert_array_equal(a.y, b.y)
    assert a.class_names == b.class_names


def test_an_entry_planted_in_a_shared_folder_is_not_used(
    fixture_data_dir, shared_root, monkeypatch, capsys
):
    shared = shared_root / "cache"
    shared.mkdir()
    shared.chmod(0o1777)  # a shared scratch folder, like /tmp
    name, content = _poison(fixture_data_dir)
    _as_nobody("tee", str(shared / name), stdin=content)
    assert (shared / name).stat().st_uid == NOBODY
    monkeypatch.setenv(cache.ENV_CACHE_DIR, str(shared))

    data, notes = _loaded_with_notes(fixture_data_dir, capsys)

    _same(data, _fresh(fixture_data_dir))  # the source's windows, not the planted ones
    assert notes == [
        f"fedprune: note: not using the cache folder {shared}: it is writable by other users "
        "(mode 1777), so another user could plant entries; set FEDPRUNE_CACHE_DIR to a folder "
        "of yours that only you can write"
    ]
    assert "PLANTED" not in capsys.readouterr().err
    assert sorted(p.name for p in shared.iterdir()) == [name]  # nothing of ours cached there
    assert (shared / name).read_bytes() == content


def test_a_folder_of_another_user_is_not_used(fixture_data_dir, shared_root, monkeypatch, capsys):
    theirs = shared_root / "theirs"
    shared_root.chmod(0o1777)
    _as_nobody("mkdir", "-m", "0755", str(theirs))
    name, content = _poison(fixture_data_dir)
    _as_nobody("tee", str(theirs / name), stdin=content)
    monkeypatch.setenv(cache.ENV_CACHE_DIR, str(theirs))

    data, notes = _loaded_with_notes(fixture_data_dir, capsys)

    _same(data, _fresh(fixture_data_dir))
    assert len(notes) == 1, notes
    assert f"belongs to uid {NOBODY}, not to you (uid 0)" in notes[0]


def test_an_entry_of_another_user_in_your_folder_is_replaced(fixture_data_dir, capsys):
    folder = cache.cache_dir()
    name, content = _poison(fixture_data_dir)
    folder.mkdir(mode=0o700, exist_ok=True)
    folder.chmod(0o755)
    # root writes it and gives it away, as a second user who could write there would own it
    _as_nobody("true")  # skips unless a second user can be acted as
    (folder / name).write_bytes(content)
    os.chown(folder / name, NOBODY, NOBODY)

    data, notes = _loaded_with_notes(fixture_data_dir, capsys)

    _same(data, _fresh(fixture_data_dir))
    assert notes == [
        f"fedprune: note: cache entry {folder / name} was ignored (it belongs to uid {NOBODY}, "
        "not to you (uid 0); another user may have written it); rebuilding it"
    ]
    assert (folder / name).stat().st_uid == os.getuid()  # rebuilt by us, used silently after
    _, notes = _loaded_with_notes(fixture_data_dir, capsys)
    assert notes == []


@pytest.mark.parametrize(
    ("make_unsafe", "reason"),
    [
        (lambda entry: entry.chmod(0o664), "is writable by other users (mode 0664)"),
        (
            lambda entry: (entry.rename(entry.with_name("real.npz")), entry.symlink_to("real.npz")),
            "is not a regular file",
        ),
    ],
    ids=["group-writable", "symbolic link"],
)
def test_an_entry_others_could_have_written_is_rebuilt(
    fixture_data_dir, capsys, make_unsafe, reason
):
    load_windows("uci_har", fixture_data_dir, download=False, verbose=False)
    (entry,) = cache.cache_dir().glob("uci_har-*.npz")
    make_unsafe(entry)

    data, notes = _loaded_with_notes(fixture_data_dir, capsys)

    _same(data, _fresh(fixture_data_dir))
    assert len(notes) == 1 and f"cache entry {entry} was ignored (it {reason};" in notes[0]
    assert stat.S_ISREG(os.lstat(entry).st_mode)  # rewritten as a plain file of ours


def test_a_folder_others_can_write_is_not_used_and_noted_once(fixture_data_dir, capsys):
    folder = cache.cache_dir()
    folder.mkdir(exist_ok=True)
    folder.chmod(0o775)
    cache._NOTED_FOLDERS.discard(folder)

    data, notes = _loaded_with_notes(fixture_data_dir, capsys)
    _same(data, _fresh(fixture_data_dir))
    assert len(notes) == 1 and "writable by other users (mode 0775)" in notes[0]
    assert list(folder.iterdir()) == []
    _, notes = _loaded_with_notes(fixture_data_dir, capsys)
    assert notes == []  # one note per folder and process
    cache._NOTED_FOLDERS.discard(folder)


def test_a_new_cache_folder_is_private(tmp_path, fixture_data_dir, monkeypatch):
    folder = tmp_path / "new" / "cache"
    monkeypatch.setenv(cache.ENV_CACHE_DIR, str(folder))
    load_windows("uci_har", fixture_data_dir, download=False, verbose=False)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    (entry,) = folder.glob("uci_har-*.npz")
    assert not entry.stat().st_mode & (stat.S_IWGRP | stat.S_IWOTH)
