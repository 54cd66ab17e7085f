"""Your client ids are the ones every family's run names its clients by: the assignments, the
deployed weights, the export folders ``client<id>/`` and the ``client`` of their json, for
ids that are not 0 .. N-1 (3, 7, 9, 11)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import fedprune as fp

pytestmark = pytest.mark.slow

IDS = (3, 7, 9)


def _windows() -> fp.WindowedDataset:
    rng = np.random.default_rng(0)
    y = np.tile(np.arange(2), 30)
    x = rng.normal(size=(60, 16, 2)).astype(np.float32) + y[:, None, None]
    return fp.from_arrays(x, y, np.repeat(IDS, 20))


def _images() -> fp.ImageClients:
    rng = np.random.default_rng(0)
    x = rng.random((48, 8, 8, 1)).astype(np.float32)
    proxy = (rng.random((4, 8, 8, 1)).astype(np.float32), np.array([0, 1, 0, 1]))
    return fp.from_images(x, np.tile([0, 1], 24), np.repeat((*IDS, 11), 12), proxy=proxy)


def _table() -> fp.ClientTable:
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(c, 0.1, (10, 2)) for c in range(3)])
    return fp.from_table(x, np.repeat(IDS, 10), np.repeat(range(3), 10))


# family: (trainer, the ids, the file every exported client folder holds)
FAMILIES = {
    "kfed": (lambda: fp.kfed(_table(), k_star=3), IDS, "assigner.json"),
    "fedhire": (lambda: fp.fedhire(_table(), k_star=3), IDS, "assigner.json"),
    "ifca": (
        lambda: fp.ifca(_images(), rounds=1, clusters=2, batch_size=8),
        (*IDS, 11),
        "float32.json",
    ),
    "caafp": (
        lambda: fp.caafp(
            _windows(),
            phases=(0, 1, 1),
            clusters=2,
            clients_per_round=3,
            prune_frequency=1,
            ft_epochs=(1,),
            local_epochs=1,
        ),  # fmt: skip
        IDS,
        "float32.json",
    ),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_your_client_ids_name_the_clients_everywhere(family, tmp_path):
    from edge_export.cli import main as edge_export

    make, ids, file = FAMILIES[family]
    result = make().run(tmp_path / "run", progress=False)
    assert sorted(result.assignments()) == sorted(ids)
    if family in ("kfed", "fedhire"):  # each client's objects, in the order you gave them
        table = _table()
        labels = result.assignments()
        for cid in ids:
            assert len(labels[cid]) == int(np.sum(table.client == cid))
    else:
        assert sorted(result.weights()) == sorted(ids)
    out = tmp_path / "export"
    argv = [str(tmp_path / "run"), "--out", str(out), "--formats", "float32", "--no-progress"]
    assert edge_export(argv) == 0
    folders = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert folders == sorted(f"client{cid}" for cid in ids)
    for cid in ids:
        meta = json.loads((out / f"client{cid}" / file).read_text())
        assert meta["client"] == cid
    report = json.loads((out / "export_report.json").read_text())
    assert sorted({e["client"] for e in report}) == sorted(ids)


def test_an_assigner_export_of_chosen_clients_takes_your_ids(tmp_path, capsys):
    from edge_export.cli import main as edge_export

    fp.kfed(_table(), k_star=3).run(tmp_path / "run", progress=False)
    out = tmp_path / "export"
    argv = [str(tmp_path / "run"), "--out", str(out), "--clients", "7", "--no-progress"]
    assert edge_export(argv) == 0
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["client7"]
    capsys.readouterr()
    other = [str(tmp_path / "run"), "--out", str(tmp_path / "other"), "--clients", "1"]
    assert edge_export(other) == 2  # 1 is a place in the client order, not an id
    assert "--clients: 1 not in the run; its clients are 3, 7, 9" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()
