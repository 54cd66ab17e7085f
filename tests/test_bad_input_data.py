"""Bad input in your own data and in what fedprune reads back, as one table per entry point.

Each row of ``WINDOWS``, ``TABLES`` and ``IMAGES`` is run twice: through the Python API
(``fp.from_arrays`` / ``fp.from_table`` / ``fp.from_images``: one :class:`DataError`) and
through ``fedprune train --dataset FILE.npz`` (rc 2, exactly one ``error:`` line, nothing
left behind). ``FILES`` are damaged ``.npz`` files (CLI and ``fp.read_npz``), ``CLIENT_IDS``
the ids of a TFF ``ClientData`` (``fp.from_client_data`` only: the CLI reads no ClientData),
``ARTEFACTS`` the arrays a finished run's readers hand to ``finetune``, ``edge-export``,
resuming and ``fp.open_result``. Tiny synthetic arrays; every check fires before training.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import fedprune as fp
from fedprune.cli import main
from fedprune.errors import DataError

pytestmark = pytest.mark.slow

RNG = np.random.default_rng(0)


def _windows(n: int = 40, t: int = 16, c: int = 3) -> dict:
    """Two clients (1, 2) of 20 windows, two classes each: valid until a row changes it."""
    x = RNG.normal(size=(n, t, c)).astype(np.float32)
    return {"x": x, "y": np.tile([0, 1], n // 2), "client_id": np.repeat([1, 2], n // 2)}


def _with(**changes: object) -> Callable[[], dict]:
    def make() -> dict:
        arrays = _windows()
        arrays.update({k: v() if callable(v) else v for k, v in changes.items()})
        return arrays

    return make


BIG = np.array([1e19, 2e19, 3e19] * 13 + [1e19])  # wrap to one int64 client if converted
# row -> (arrays, fragment of the one error line)
WINDOWS: dict[str, tuple[Callable[[], dict], str]] = {
    "float ids beyond int64": (_with(client_id=BIG), "client_id[0] = 1e+19 is beyond 2^53"),
    "uint64 ids beyond int64": (
        _with(client_id=np.repeat(np.array([1, 2**64 - 1], np.uint64), 20)),
        "client_id[20] = 18446744073709551615 is beyond the largest int64",
    ),
    "negative id": (
        _with(client_id=np.repeat([-1, 2], 20)),
        "client_id[0] = -1 is negative; client_id must hold whole numbers 0, 1, 2",
    ),
    "fractional id": (_with(client_id=np.repeat([1.5, 2.0], 20)), "client_id[0] = 1.5 is not"),
    "float labels beyond int64": (_with(y=np.tile([0.0, 1e19], 20)), "y[1] = 1e+19 is beyond"),
    "a label of 10^12": (
        _with(y=np.tile([0, 10**12], 20)),
        "y[1] = 1000000000000 implies 1000000000001 classes (0..1000000000000) for 40 labels",
    ),
    "windows of no time step": (
        _with(x=lambda: np.zeros((40, 0, 3), np.float32)),
        "x has shape (40, 0, 3): no time steps",
    ),
    "windows of no channel": (
        _with(x=lambda: np.zeros((40, 16, 0), np.float32)),
        "x has shape (40, 16, 0): no channels",
    ),
    "class names not UTF-8": (
        _with(class_names=np.array([b"sit", b"w\xffalk"])),
        "class_names[1] = b'w\\xffalk' is not UTF-8 text",
    ),
}


def _table(**changes: object) -> Callable[[], dict]:
    def make() -> dict:
        arrays = {"x": RNG.normal(size=(8, 3)), "client_id": np.repeat([1, 2], 4)}
        arrays.update(changes)
        return arrays

    return make


TABLES: dict[str, tuple[Callable[[], dict], str]] = {
    "table negative id": (_table(client_id=np.repeat([-1, 2], 4)), "client_id[0] = -1 is"),
    "table float ids beyond int64": (
        _table(client_id=np.repeat([1e19, 2e19], 4)),
        "client_id[0] = 1e+19 is beyond 2^53",
    ),
    "table uint64 ids": (
        _table(client_id=np.repeat(np.array([3, 2**63], np.uint64), 4)),
        "client_id[4] = 9223372036854775808 is beyond the largest int64",
    ),
    "table classes beyond int64": (
        _table(y=np.array([0.0, 1, 1e19, 0, 1, 0, 1, 0])),
        "y[2] = 1e+19 is beyond 2^53",
    ),
    "table without features": (
        _table(x=np.zeros((8, 0))),
        "x has shape (8, 0): no features",
    ),
}


def _images(**changes: object) -> Callable[[], dict]:
    def make() -> dict:
        arrays = {
            "x": RNG.random((8, 4, 4, 1)).astype(np.float32),
            "y": np.tile([0, 1], 4),
            "client_id": np.repeat([1, 2], 4),
            "proxy_x": RNG.random((4, 4, 4, 1)).astype(np.float32),
            "proxy_y": np.array([0, 1, 0, 1]),
        }
        arrays.update(changes)
        return arrays

    return make


IMAGES: dict[str, tuple[Callable[[], dict], str]] = {
    "images negative id": (_images(client_id=np.repeat([0, -2], 4)), "client_id[4] = -2 is"),
    "images fractional id": (_images(client_id=np.repeat([0.5, 2], 4)), "client_id[0] = 0.5"),
    "images of no width": (
        _images(x=np.zeros((8, 4, 0, 1), np.float32)),
        "x has shape (8, 4, 0, 1): no width",
    ),
    "images class names not UTF-8": (
        _images(class_names=np.array([b"\xfe", b"b"])),
        "class_names[0] = b'\\xfe' is not UTF-8 text",
    ),
}


def _npy_as_npz(path: Path) -> None:
    np.save(path.with_suffix(".npy"), np.zeros(3))
    path.with_suffix(".npy").rename(path)


def _huge_header(path: Path) -> None:
    """A 300-byte archive whose x.npy header declares (10^12, 16, 2) float64 (233 TiB)."""
    header = io.BytesIO()
    shape = (10**12, 16, 2)
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": shape}
    )
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("x.npy", header.getvalue() + bytes(64))
        for key, value in (("y", np.zeros(2, np.int64)), ("client_id", np.zeros(2, np.int64))):
            member = io.BytesIO()
            np.save(member, value)
            z.writestr(f"{key}.npy", member.getvalue())


def _deflate_bomb(path: Path) -> None:
    """A ~320 kB archive whose x.npy unpacks to 320 MiB of zeros (1000:1), a real array."""
    count = 80 * 2**20
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f4", "fortran_order": False, "shape": (count // 16, 16, 1)}
    )
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        with z.open("x.npy", "w", force_zip64=True) as member:
            member.write(header.getvalue())
            block = bytes(2**24)
            for _ in range(count * 4 // len(block)):
                member.write(block)


FILES: dict[str, tuple[Callable[[Path], None], str]] = {
    "a .npy saved as .npz": (_npy_as_npz, "a single .npy array (numpy.save), not an .npz"),
    "a header declaring 233 TiB": (
        _huge_header,
        "array 'x' declares shape (1000000000000, 16, 2) of float64 (232.8 TiB) but holds 64",
    ),
    "a deflate bomb": (_deflate_bomb, "beyond 200:1): a decompression bomb, not data"),
}

CLIENT_IDS: dict[str, tuple[list[str], str]] = {
    "ids 01 and 1": (["1", "01"], "client ids '1' and '01' are both client 1"),
    "ids -0 and 0": (["0", "-0"], "client ids '0' and '-0' are both client 0"),
    "Arabic-Indic digit": (["1", "\u0661"], "client id '\u0661' reads as a number but is not"),
    "id --1": (["--1", "2"], "client id '--1' reads as a number but is not a whole number"),
    "id superscript two": (["\u00b2", "3"], "client id '\u00b2' reads as a number"),
    "a 23-digit id": (
        ["1", "12345678901234567890123"],
        "client id '12345678901234567890123' is beyond the largest client id",
    ),
    "negative id string": (["-3", "4"], "client id '-3' is negative"),
    "numbers and names mixed": (["1", "alice"], "client ids mix numbers ('1') and names"),
}


# --- running a row ---------------------------------------------------------------------------
FEDAVG = ["train", "fedavg", "--rounds", "1", "--clients-per-round", "2", "--local-epochs", "1"]
FEDHIRE = ["train", "fedhire"]
ASCFL = ["train", "ascfl", "--rounds", "1", "--warmup-rounds", "0"]


def _snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
        for p in sorted(root.rglob("*"))
    }


def _cli_refuses(command: list[str], work: Path, fragment: str, capsys) -> None:
    """``fedprune COMMAND --out WORK/out``: rc 2, one error line holding ``fragment``,
    ``work`` unchanged (no run folder made)."""
    before = _snapshot(work)
    capsys.readouterr()
    rc = main([*command, "--no-progress", "--out", str(work / "out")])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert rc == 2, err
    assert len(errors) == 1 and fragment in errors[0], err
    assert "Traceback" not in err
    assert _snapshot(work) == before


@pytest.mark.parametrize("row", sorted(WINDOWS))
def test_bad_windows(row, tmp_path, capsys):
    arrays, fragment = WINDOWS[row][0](), WINDOWS[row][1]
    with pytest.raises(DataError) as caught:
        fp.from_arrays(arrays["x"], arrays["y"], arrays["client_id"], **_names(arrays))
    assert fragment in str(caught.value)
    np.savez(tmp_path / "mine.npz", **arrays)
    _cli_refuses([*FEDAVG, "--dataset", str(tmp_path / "mine.npz")], tmp_path, fragment, capsys)


def _names(arrays: dict) -> dict:
    return {"class_names": list(arrays["class_names"])} if "class_names" in arrays else {}


@pytest.mark.parametrize("row", sorted(TABLES))
def test_bad_tables(row, tmp_path, capsys):
    arrays, fragment = TABLES[row][0](), TABLES[row][1]
    with pytest.raises(DataError) as caught:
        fp.from_table(arrays["x"], arrays["client_id"], arrays.get("y"))
    assert fragment in str(caught.value)
    np.savez(tmp_path / "table.npz", **arrays)
    command = [*FEDHIRE, "--dataset", str(tmp_path / "table.npz")]
    _cli_refuses(command, tmp_path, fragment, capsys)


@pytest.mark.parametrize("row", sorted(IMAGES))
def test_bad_images(row, tmp_path, capsys):
    arrays, fragment = IMAGES[row][0](), IMAGES[row][1]
    with pytest.raises(DataError) as caught:
        fp.from_images(
            arrays["x"], arrays["y"], arrays["client_id"],
            proxy=(arrays["proxy_x"], arrays["proxy_y"]), **_names(arrays),
        )  # fmt: skip
    assert fragment in str(caught.value)
    np.savez(tmp_path / "images.npz", **arrays)
    _cli_refuses([*ASCFL, "--dataset", str(tmp_path / "images.npz")], tmp_path, fragment, capsys)


@pytest.mark.parametrize("row", sorted(FILES))
def test_bad_npz_files(row, tmp_path, capsys):
    make, fragment = FILES[row]
    path = tmp_path / "mine.npz"
    make(path)
    with pytest.raises(DataError) as caught:
        fp.read_npz(path)
    assert fragment in str(caught.value)
    _cli_refuses([*FEDAVG, "--dataset", str(path)], tmp_path, fragment, capsys)


def test_a_declared_size_beyond_the_cap_is_refused_before_reading(tmp_path):
    from fedprune.runs.npz import NpzProblem, read_arrays

    np.savez(tmp_path / "a.npz", x=np.zeros(1000))
    with pytest.raises(NpzProblem, match=r"unpack to 7.9 KiB, beyond the 1.0 KiB fedprune"):
        read_arrays(tmp_path / "a.npz", max_bytes=1024)


@pytest.mark.parametrize("row", sorted(CLIENT_IDS))
def test_bad_client_data_ids(row):
    import tensorflow_federated as tff

    ids, fragment = CLIENT_IDS[row]
    x = RNG.normal(size=(4, 8, 3)).astype(np.float32)
    data = {i: {"x": x, "y": np.array([0, 1, 0, 1])} for i in ids}
    with pytest.raises(DataError) as caught:
        fp.from_client_data(tff.simulation.datasets.TestClientData(data))
    assert fragment in str(caught.value)


def test_client_data_ids_stay_the_users():
    import tensorflow_federated as tff

    x = RNG.normal(size=(4, 8, 3)).astype(np.float32)
    data = {i: {"x": x, "y": np.array([0, 1, 0, 1])} for i in ("7", "0042", "3")}
    windows = fp.from_client_data(tff.simulation.datasets.TestClientData(data))
    assert windows.subjects.tolist() == [3, 7, 42]


def test_a_file_named_like_a_built_in_dataset_keeps_its_small_clients(tmp_path):
    """WISDM's protocol leaves out clients of fewer than 10 windows; your wisdm.npz does not
    (the same bytes as mine.npz give the same clients)."""
    from fedprune.data.registry import load_federated

    x = RNG.normal(size=(26, 8, 3)).astype(np.float32)
    ids = np.repeat([1, 2], [20, 6])  # client 2 has 6 windows
    for name in ("wisdm.npz", "mine.npz"):
        np.savez(tmp_path / name, x=x, y=np.tile([0, 1], 13), client_id=ids)
        fed = load_federated(str(tmp_path / name), verbose=False)
        assert [c.client_id for c in fed.clients] == [1, 2], name
    with pytest.raises(DataError, match="name 'wisdm' is a built-in dataset's"):
        fp.from_arrays(x, np.tile([0, 1], 13), ids, name="wisdm")


# --- what a finished run's readers refuse ----------------------------------------------------
def _models(value: float = 0.5) -> list[np.ndarray]:
    return [np.full((3, 2), value, np.float32), np.zeros(2, np.float32)]


def _assigner(run: Path, centre: float) -> None:
    from fedprune.runs.assigner import Assigner, ClientAssigner

    centres = np.array([[0.0, 1.0], [centre, centre]])
    client = ClientAssigner(centres, np.array([0, 1]))
    Assigner("kfed", "gaussian", 2, [client, client]).write(run)


def _read(kind: str, run: Path) -> object:
    from fedprune.runs import artefacts
    from fedprune.runs.assigner import read_assigner

    return {
        "personal": lambda: artefacts.read_personal_models(run, 1),
        "cluster": lambda: artefacts.read_cluster_models(run),
        "masks": lambda: artefacts.read_masks(run),
        "assigner": lambda: read_assigner(run),
    }[kind]()


def _write(kind: str, run: Path, bad: bool) -> None:
    from fedprune.runs import artefacts

    if kind == "personal":
        artefacts.write_personal_models(run, 1, {1: _models(), 3: _models(np.nan if bad else 1)})
    elif kind == "cluster":
        artefacts.write_cluster_models(run, {0: _models(), 1: _models(np.nan if bad else 1)})
    elif kind == "masks":
        masks = [np.ones((3, 2)), np.full((3, 2), 7 if bad else 0)]
        artefacts.write_masks(run, {0: masks, 1: masks})
    else:
        _assigner(run, np.nan if bad else 2.0)


ARTEFACTS = {
    "personal": "personal_ft1.npz is damaged (non-finite numbers in 'client 3' array 0: 6 values)",
    "cluster": "cluster_models.npz is damaged (non-finite numbers in 'cluster 1' array 0: 6",
    "masks": "masks.npz is damaged ('cluster 0' array 1 holds 7, not a mask value 0 or 1)",
    "assigner": "assigner.npz is damaged (non-finite numbers in 'centres0' array 0: 2 values)",
}


@pytest.mark.parametrize("kind", sorted(ARTEFACTS))
def test_run_artefacts_are_checked_when_read_back(kind, tmp_path):
    _write(kind, tmp_path, bad=False)
    _read(kind, tmp_path)  # the same file without the bad value reads
    _write(kind, tmp_path, bad=True)
    with pytest.raises(DataError) as caught:
        _read(kind, tmp_path)
    assert ARTEFACTS[kind] in str(caught.value)
    assert "re-run training" in str(caught.value)


def test_models_of_different_shapes_in_one_file_are_damaged(tmp_path):
    from fedprune.runs import artefacts

    other = [np.zeros((4, 2), np.float32), np.zeros(2, np.float32)]
    artefacts.write_personal_models(tmp_path, 1, {1: _models(), 2: other})
    with pytest.raises(DataError, match=r"'client 2' array 0 has shape \(4, 2\), 'client 1'"):
        artefacts.read_personal_models(tmp_path, 1)


# --- fedprune plot on metrics that cannot be drawn -----------------------------------------
def _run_folder(path: Path, header: str, lines: list[str]) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text('{"method": "fedavg"}\n')
    (path / "metrics.csv").write_text("\n".join([header, *lines]) + "\n")
    return path


PLOTS = {
    "a round of inf": ("round,acc", ["1,0.5", "inf,0.6", "3,0.7"], "round inf"),
    "a round of nan": ("round,acc", ["1,0.5", "nan,0.6"], "round nan"),
    "a value of inf": ("round,loss", ["1,0.5", "2,inf"], "loss at round 2 is inf"),
    "cluster weights summing to 0": (
        "round,cluster,clients,acc",
        ["1,0,2,0.5", "1,1,-2,0.7", "2,0,2,0.6"],
        "acc at round 1: its clusters' clients sum to 0",
    ),
}


@pytest.mark.parametrize("row", sorted(PLOTS))
def test_plot_leaves_out_what_cannot_be_drawn_with_one_note(row, tmp_path, capsys):
    header, lines, note = PLOTS[row]
    run = _run_folder(tmp_path / "run", header, lines)
    capsys.readouterr()
    assert main(["plot", str(run), "--out", str(tmp_path / "p.png")]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "note:" in line]
    assert len(notes) == 1 and note in notes[0] and "left out of the plot" in notes[0]
    assert (tmp_path / "p.png").stat().st_size > 0


def test_dollars_in_names_are_drawn_as_text(tmp_path, capsys):
    """A run folder ``price_$5_$10`` with a column ``acc_$x$`` plots (mathtext would fail)."""
    from fedprune.runs.plot import plot_runs

    run = _run_folder(tmp_path / "price_$5_$10", "round,acc_$x$,loss", ["1,0.5,1", "2,0.6,0.9"])
    assert plot_runs([run], run / "curves.png") == run / "curves.png"
    assert (run / "curves.png").stat().st_size > 0
    assert main(["plot", str(run), "--out", str(tmp_path / "both.png")]) == 0
    assert (tmp_path / "both.png").exists()
