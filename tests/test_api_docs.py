"""docs/api.md's code blocks run as written, in order, in one namespace; and the examples run.

The blocks run from a folder that has the repository's ``examples`` beside them (as the
repository root does), with ``FEDPRUNE_DATA_DIR`` pointing to fixture files in the official
formats (a WISDM raw file of 4 users, an E. coli-format table, Fashion-MNIST-format idx
files of patterns), so the test needs no downloaded data.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

from fedprune.data import images
from tests.algorithms.test_fedcref_run import pattern_images
from tests.conftest import wisdm_text
from tests.data.test_images import write_idx_pair

REPO = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(path: Path) -> list[str]:
    return FENCE.findall(path.read_text(encoding="utf-8"))


def load_example(name: str):  # noqa: ANN201 (a module)
    spec = importlib.util.spec_from_file_location(name, REPO / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ecoli_like(path: Path, per_class: int = 40, seed: int = 0) -> Path:
    """An ``ecoli.data``-format table: 3 well separated classes of ``per_class`` objects."""
    rng = np.random.default_rng(seed)
    lines = []
    for k, name in enumerate(("cp", "im", "pp")):
        for i in range(per_class):
            values = np.clip(0.2 + 0.3 * k + 0.03 * rng.normal(size=7), 0, 1)
            lines.append(f"P{k}_{i}_ECOLI  " + "  ".join(f"{v:.2f}" for v in values) + f"   {name}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def fixture_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = tmp_path / "data"
    (data / "wisdm").mkdir(parents=True)
    (data / "wisdm" / "WISDM_ar_v1.1_raw.txt").write_text(
        wisdm_text(users=(1, 2, 3, 4), rows_per_activity=200)
    )
    ecoli_like(data / "uci_tabular" / "ecoli" / "ecoli.data")
    for split, seed in (("train", 0), ("test", 1)):  # Fashion-MNIST-format patterns
        x, y = pattern_images(per_class=40, classes=7, seed=seed)
        write_idx_pair(data / "fashion_mnist", images.file_names("fashion_mnist", split), x, y)
    monkeypatch.setenv("FEDPRUNE_DATA_DIR", str(data))
    return data


def test_the_page_has_the_walkthrough_blocks():
    blocks = python_blocks(REPO / "docs" / "api.md")
    assert len(blocks) >= 5
    assert any("fp.caafp(" in b for b in blocks) and any("edge_export(" in b for b in blocks)


@pytest.mark.slow
def test_api_page_blocks_run_in_order(fixture_data, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    (work / "examples").symlink_to(REPO / "examples")
    monkeypatch.chdir(work)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))  # the page inserts into it
    namespace: dict = {"__name__": "__api_docs__"}
    for number, block in enumerate(python_blocks(REPO / "docs" / "api.md"), 1):
        try:
            exec(compile(block, f"docs/api.md block {number}", "exec"), namespace)  # noqa: S102
        except Exception as err:  # pragma: no cover - the message names the block
            raise AssertionError(f"docs/api.md block {number} failed: {err!r}") from err
    summary = namespace["summary"]
    assert summary["dense_layers"] == ["norm"]
    assert summary["prune_layers"] == ["stem", "sep", "hidden", "probs"]
    assert abs(summary["sparsity_pruned_layers"] - 0.7) < 0.005
    report = json.loads((work / "runs/api-walkthrough/export/export_report.json").read_text())
    assert {e["format"] for e in report} == {"float32", "int8"}
    assert all(e["flipped_windows"] == 0 for e in report if e["format"] == "float32")
    assert namespace["found"].summary["ari"] > 0.9  # three well separated blobs


@pytest.mark.slow
def test_the_readme_python_example_runs_and_writes_a_device_file(tmp_path, monkeypatch):
    (block,) = python_blocks(REPO / "README.md")
    assert len(block.strip().splitlines()) <= 7  # the first screen's example stays short
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "README.md's Python example", "exec"), {"__name__": "__readme__"})  # noqa: S102
    summary = json.loads((tmp_path / "runs/mine/summary.json").read_text())
    assert summary["rounds"] == 2
    report = json.loads((tmp_path / "export/mine/export_report.json").read_text())
    assert {e["format"] for e in report} == {"int8"} and len(report) == 2  # clients 1 and 2
    assert (tmp_path / "export/mine/client1/int8.tflite").stat().st_size > 0


@pytest.mark.slow
def test_caafp_own_model_example(fixture_data, tmp_path):
    example = load_example("caafp_own_model")
    out = example.main(["--quick", "--out", str(tmp_path / "run")])
    assert out["dense_layers"] == ["norm"]
    assert abs(out["sparsity_of_pruned_layers"] - 0.7) < 0.005
    assert out["int8_windows"] > 0
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["model"] == "user:my_model"
    assert (tmp_path / "run" / "model.json").exists()


@pytest.mark.slow
def test_fedhire_own_table_example(fixture_data, tmp_path):
    example = load_example("fedhire_own_table")
    out = example.main(["--out", str(tmp_path / "run"), "--clients", "4"])
    assert set(out) == {"fedhire", "kfed"}
    assert out["kfed"]["ari"] > 0.9  # three well separated classes
    assert out["fedhire"]["purity"] > 0.6


@pytest.mark.slow
def test_ascfl_ifca_client_data_example(fixture_data, tmp_path):
    example = load_example("ascfl_ifca_client_data")
    out = example.main(["--quick", "--out", str(tmp_path / "runs")])
    assert set(out) == {"ascfl", "ifca"}
    for name in out:
        config = json.loads((tmp_path / "runs" / name / "config.json").read_text())
        assert config["model"] == "user:my_cnn" and config["num_clients"] == 8
        assert (tmp_path / "runs" / name / "model.json").exists()
        assert isinstance(out[name]["ari"], float)  # the groups given are the ARI's truth
    assert out["ifca"]["clusters"] <= 4
