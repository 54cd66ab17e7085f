"""Bad input to ``edge-export``: every case exits 2 with exactly one ``edge-export: error:`` line
that names the offending file or option, no traceback, and leaves ``--out`` as it was (not
created, or unchanged). Ctrl-C is one ``edge-export: interrupted`` line with exit 130.

The run directories are written by hand (a random HAR CNN checkpoint, no training); the
table's cases fail before the data is read or TensorFlow is imported by the command.
``--help`` imports no TensorFlow (a subprocess checks ``sys.modules``).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from edge_export.cli import main
from fedprune.runs import RunDir
from tests.conftest import damage_zip_member

REPO = Path(__file__).resolve().parents[2]
FEDAVG = {"method": "fedavg", "dataset": "uci_har", "seed": 0, "standardize": False}
CAAFP = {"method": "caafp", "dataset": "uci_har", "seed": 0, "ft_epochs": [1, 3]}
FEDCREF = {"method": "fedcref", "dataset": "mnist", "seed": 0}


@pytest.fixture(scope="module")
def har_weights() -> list[np.ndarray]:
    """The weights of an untrained HAR CNN (the shapes of a real checkpoint)."""
    from fedprune.models.cnn1d import build_har_cnn

    return build_har_cnn((128, 9), 6, seed=0).get_weights()


def _fedavg(run: Path, weights: list[np.ndarray]) -> None:
    """A finished FedAvg run: config.json, checkpoint.npz, summary.json."""
    rundir = RunDir(run, FEDAVG)
    rundir.save_checkpoint(1, {"trainable": weights, "non_trainable": []})
    rundir.write_summary({"method": "fedavg"})


def _caafp(run: Path, weights: list[np.ndarray]) -> None:
    """A finished CA-AFP run whose fine-tuning wrote only personal_ft1.npz (of [1, 3])."""
    rundir = RunDir(run, CAAFP)
    kernels = [w for w in weights if w.ndim > 1]
    np.savez(run / "personal_ft1.npz", **{f"client1_{i}": w for i, w in enumerate(weights)})
    masks = {f"cluster0_{i}": np.ones(k.shape, np.uint8) for i, k in enumerate(kernels)}
    np.savez(run / "masks.npz", **masks)
    (run / "clusters.json").write_text(json.dumps({"1": 0}) + "\n")
    rundir.write_summary({"method": "caafp"})


def _fedcref(run: Path, weights: list[np.ndarray]) -> None:
    """A finished FedCRef run with one (tiny) community autoencoder."""
    rundir = RunDir(run, FEDCREF)
    rng = np.random.default_rng(0)
    model = [rng.normal(size=(4, 2)), np.zeros(2), rng.normal(size=(2, 4)), np.zeros(4)]
    np.savez(run / "community_models.npz", **{f"c0_{k}": w for k, w in enumerate(model)})
    rundir.write_summary({"method": "fedcref"})


def _truncate(name: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        data = (run / name).read_bytes()
        (run / name).write_bytes(data[: len(data) // 2])

    return damage


def _garbage(name: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        (run / name).write_bytes(b"this is not what fedprune wrote\n" * 10)

    return damage


def _empty(name: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        (run / name).write_bytes(b"")

    return damage


def _flip_member(name: str, member: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        damage_zip_member(run / name, member)

    return damage


def _checkpoint_without(key: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        with np.load(run / "checkpoint.npz") as z:
            arrays = {k: z[k] for k in z.files if k != key}
        np.savez(run / "checkpoint.npz", **arrays)

    return damage


def _remove(name: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        (run / name).unlink()

    return damage


def _keep(run: Path) -> None:
    """No damage."""


# name: (run writer or None, damage, extra argv (RUN/TMP replaced), fragment of the error line)
CASES = {
    "run dir missing": (None, _keep, [], "run is not a fedprune run directory (it does not"),
    "run dir is a file": (None, _keep, [], "a-file is not a fedprune run directory (it is a file"),
    "no config.json": (_fedavg, _remove("config.json"), [], "no config.json"),
    "config.json truncated": (_fedavg, _truncate("config.json"), [], "config.json is damaged"),
    "config.json garbage": (_fedavg, _garbage("config.json"), [], "config.json is damaged"),
    "config.json lacks dataset": (
        _fedavg,
        lambda run: (run / "config.json").write_text('{"method": "fedavg", "seed": 0}'),
        [],
        "config.json is damaged (no dataset)",
    ),
    "not finished": (_fedavg, _remove("summary.json"), [], "no summary.json"),
    "summary.json truncated": (_fedavg, _truncate("summary.json"), [], "summary.json is damaged"),
    "checkpoint.npz missing": (_fedavg, _remove("checkpoint.npz"), [], "checkpoint.npz is missing"),
    "checkpoint.npz truncated": (
        _fedavg,
        _truncate("checkpoint.npz"),
        [],
        "checkpoint.npz is damaged",
    ),
    "checkpoint.npz garbage": (
        _fedavg,
        _garbage("checkpoint.npz"),
        [],
        "checkpoint.npz is damaged",
    ),
    "checkpoint.npz empty": (_fedavg, _empty("checkpoint.npz"), [], "checkpoint.npz is damaged"),
    "checkpoint.npz bad CRC": (
        _fedavg,
        _flip_member("checkpoint.npz", "trainable__0.npy"),
        [],
        "checkpoint.npz is damaged",
    ),
    "checkpoint.npz lacks an array": (
        _fedavg,
        _checkpoint_without("trainable__2"),
        [],
        "checkpoint.npz is damaged (no array 'trainable__2')",
    ),
    "personal_ft3.npz missing (default epochs)": (
        _caafp,
        _keep,
        [],
        "personal_ft3.npz is missing (the longest fine-tuning); the run has personal models "
        "after 1 epochs",
    ),
    "personal_ft7.npz missing (--ft-epochs 7)": (
        _caafp,
        _keep,
        ["--ft-epochs", "7"],
        "personal_ft7.npz is missing (--ft-epochs 7)",
    ),
    "personal_ft1.npz truncated": (
        _caafp,
        _truncate("personal_ft1.npz"),
        ["--ft-epochs", "1"],
        "personal_ft1.npz is damaged",
    ),
    "masks.npz truncated": (
        _caafp,
        _truncate("masks.npz"),
        ["--ft-epochs", "1"],
        "masks.npz is damaged",
    ),
    "clusters.json truncated": (
        _caafp,
        _truncate("clusters.json"),
        ["--ft-epochs", "1"],
        "clusters.json is damaged",
    ),
    "community_models.npz truncated": (
        _fedcref,
        _truncate("community_models.npz"),
        [],
        "community_models.npz is damaged",
    ),
    "community_models.npz garbage": (
        _fedcref,
        _garbage("community_models.npz"),
        [],
        "community_models.npz is damaged",
    ),
    "unknown format": (_fedavg, _keep, ["--formats", "float32,int4"], "--formats: unknown"),
    "sparse autoencoder format": (
        _fedcref,
        _keep,
        ["--formats", "int8-sparse"],
        "--formats: ['int8-sparse'] not offered for autoencoders",
    ),
    "malformed --clients": (_fedavg, _keep, ["--clients", "1,x"], "--clients must be"),
    "--out is a file": (_fedavg, _keep, ["--out", "TMP/a-file"], "--out TMP/a-file is a file"),
    "--out under a file": (
        _fedavg,
        _keep,
        ["--out", "TMP/a-file/export"],
        "TMP/a-file is a file, so the folder cannot be made",
    ),
    "--target without --micro": (
        _fedavg,
        _keep,
        ["--target", "cortex-m4"],
        "--target, --tflm-dir and --cmsis-dir are options of --micro",
    ),
    "--tflm-dir not a TFLM tree": (
        _fedavg,
        _keep,
        ["--micro", "--tflm-dir", "TMP"],
        "is not a TensorFlow Lite Micro tree",
    ),
    "--cmsis-dir without --tflm-dir": (
        _fedavg,
        _keep,
        ["--micro", "--target", "cortex-m4", "--cmsis-dir", "TMP"],
        "--cmsis-dir needs --tflm-dir",
    ),
}


def _single_error_line(err: str) -> str:
    """The one ``edge-export: error:`` line of ``err`` (there must be exactly one)."""
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("edge-export: error:")]
    assert len(lines) == 1, err
    return lines[0]


def _tree(path: Path) -> dict[str, bytes] | None:
    """Every file under ``path`` with its content (``None``: no such path)."""
    if not path.exists():
        return None
    if path.is_file():
        return {"": path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line(case, tmp_path, har_weights, capsys):
    write_run, damage, extra, fragment = CASES[case]
    run = tmp_path / "run"
    if write_run is not None:
        write_run(run, har_weights)
        damage(run)
    (tmp_path / "a-file").write_text("not a folder\n")
    argv = [str(run), "--out", str(tmp_path / "export"), "--no-progress"]
    argv += [a.replace("TMP", str(tmp_path)) for a in extra]
    if case == "run dir is a file":
        argv[0] = str(tmp_path / "a-file")
    out = Path(argv[len(argv) - argv[::-1].index("--out")])  # the last --out counts
    before = _tree(out)
    capsys.readouterr()

    assert main(argv) == 2

    captured = capsys.readouterr()
    line = _single_error_line(captured.err)
    assert fragment.replace("TMP", str(tmp_path)) in line
    assert captured.err == line + "\n"  # nothing else: it failed before reading any data
    assert captured.out == ""
    assert _tree(out) == before  # --out not created, or unchanged
    if before is None:
        assert not out.exists()


@pytest.mark.skipif(
    os.geteuid() == 0,
    reason="runs as root, and root writes into a mode-0o500 folder anyway; the '--out under a "
    "file' case fails for root too",
)
def test_read_only_out_is_one_line(tmp_path, har_weights, capsys):
    _fedavg(tmp_path / "run", har_weights)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        for out in (locked, locked / "export"):
            assert main([str(tmp_path / "run"), "--out", str(out), "--no-progress"]) == 2
            line = _single_error_line(capsys.readouterr().err)
            assert f"--out {out}" in line and "is not writable" in line
            assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o700)


def test_unwritable_out_is_one_line_whoever_runs(tmp_path, har_weights, capsys, monkeypatch):
    """The same check where the operating system would refuse even root (a read-only file
    system): ``os.access`` says so; here it is made to say so for the parent folder."""
    import edge_export.cli

    _fedavg(tmp_path / "run", har_weights)
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(
        edge_export.cli.os,
        "access",
        lambda path, mode: False if Path(path) == locked else real_access(path, mode),
    )
    out = locked / "export"
    assert main([str(tmp_path / "run"), "--out", str(out), "--no-progress"]) == 2
    line = _single_error_line(capsys.readouterr().err)
    assert f"--out {out}: {locked}, where it would be made, is not writable" in line
    assert list(locked.iterdir()) == []


def test_help_imports_no_tensorflow():
    """``--help`` answers without importing TensorFlow (the time is not asserted here)."""
    code = (
        "import sys\n"
        "from edge_export import cli\n"
        "try:\n"
        "    cli.main(['--help'])\n"
        "except SystemExit as exit:\n"
        "    assert exit.code == 0\n"
        "print('tensorflow' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert "--verbose" in result.stdout and "int16x8" in result.stdout
    assert result.stdout.splitlines()[-1] == "False"
    assert result.stderr == ""
    module = subprocess.run(
        [sys.executable, "-m", "edge_export.cli", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert module.returncode == 0 and module.stdout.startswith("usage: edge-export")
    assert module.stderr == ""  # no TensorFlow log lines


# --- failures after the checks, while the progress bar runs (need the data and TF) ------------


@pytest.fixture
def fedavg_run(tmp_path, fixture_data_dir, har_weights):
    """A finished FedAvg run directory, untrained weights, and the fixture data."""
    _fedavg(tmp_path / "run", har_weights)
    return tmp_path / "run", fixture_data_dir


def _export_argv(run: Path, out: Path, data_dir: Path) -> list[str]:
    """One client, one format, with the progress bar (on the captured stderr)."""
    return [str(run), "--clients", "1", "--formats", "float32", "--out", str(out)] + [
        "--data-dir",
        str(data_dir),
    ]


@pytest.mark.slow
def test_weights_of_another_model_are_one_line_after_the_bar(fedavg_run, tmp_path, capsys):
    from fedprune.models.cnn1d import build_har_cnn

    run, data_dir = fedavg_run
    other = build_har_cnn((128, 9), 5, seed=0).get_weights()  # 5 classes, not UCI-HAR's 6
    RunDir(run, FEDAVG).save_checkpoint(1, {"trainable": other, "non_trainable": []})
    out = tmp_path / "export"

    assert main(_export_argv(run, out, data_dir)) == 2

    err = capsys.readouterr().err
    line = _single_error_line(err)
    assert "checkpoint.npz: its weights do not fit the uci_har model" in line
    assert "\nedge-export: error:" in err  # its own line, not glued to the bar
    assert not out.exists()


@pytest.mark.slow
def test_interrupt_is_one_line_after_the_bar(fedavg_run, tmp_path, capsys, monkeypatch):
    import edge_export.export

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(edge_export.export, "_export_one", interrupted)
    run, data_dir = fedavg_run

    assert main(_export_argv(run, tmp_path / "export", data_dir)) == 130

    err = capsys.readouterr().err
    assert "Traceback" not in err and "export:" in err  # the bar was shown
    assert err.endswith("\nedge-export: interrupted\n") and err.count("interrupted") == 1


def test_interrupt_before_the_export_is_one_line(fedavg_run, tmp_path, capsys, monkeypatch):
    import edge_export.run_models

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(edge_export.run_models, "load_recorded", interrupted)
    run, data_dir = fedavg_run

    assert main(_export_argv(run, tmp_path / "export", data_dir)) == 130

    assert capsys.readouterr().err == "edge-export: interrupted\n"
    assert not (tmp_path / "export").exists()


@pytest.mark.slow
def test_write_error_is_one_line(fedavg_run, tmp_path, capsys, monkeypatch):
    """A write that fails after the checks (full disk, permissions changed meanwhile)."""
    import edge_export.export

    out = tmp_path / "export"

    def refused(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(out / "client1"))

    monkeypatch.setattr(edge_export.export, "export_run", refused)
    run, data_dir = fedavg_run

    assert main(_export_argv(run, out, data_dir)) == 2

    line = _single_error_line(capsys.readouterr().err)
    assert f"cannot write {out / 'client1'} (Permission denied); pass a writable --out" in line
