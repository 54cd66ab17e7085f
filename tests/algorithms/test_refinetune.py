"""``fedprune finetune``: a finished run fine-tuned again gives the run's own numbers for the
lengths it has, new ones for the others, and never trains a round."""

import json

import numpy as np
import pytest

from fedprune.algorithms import refinetune as R
from fedprune.algorithms.clusterfl import run_clusterfl
from fedprune.algorithms.pipeline import run_method as run_caafp
from fedprune.configs.clusterfl import ClusterFLConfig
from fedprune.configs.pipeline import CAAFPConfig
from fedprune.errors import ConfigError
from tests.conftest import har_arrays, write_uci_har

pytestmark = pytest.mark.slow

CAAFP = CAAFPConfig(
    "uci_har",
    phases=(1, 1, 2),
    clusters=2,
    clients_per_round=3,
    local_epochs=1,
    start_sparsity=0.5,
    target_sparsity=0.7,
    prune_frequency=1,
    ft_epochs=(1, 3),
)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """The fixture UCI-HAR zip (6 subjects), shared by the module's runs."""
    root = tmp_path_factory.mktemp("data")
    (root / "uci_har").mkdir()
    write_uci_har(root / "uci_har", *har_arrays(6, subjects=tuple(range(1, 7))), as_zip=True)
    return root


@pytest.fixture(scope="module")
def caafp_run(tff_context, tmp_path_factory, data_dir):
    out = tmp_path_factory.mktemp("caafp") / "run"
    return out, run_caafp(CAAFP, out, data_dir, progress=False)


def _npz(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def test_lengths_the_run_has_are_its_own_numbers_and_models(
    caafp_run, tmp_path, data_dir, monkeypatch
):
    source, original = caafp_run
    out = tmp_path / "again"
    summary = R.refinetune(source, (0, 3, 1, 2), out, data_dir, progress=False)
    assert set(summary["finetune"]) == {"0", "1", "2", "3"}
    for e in ("1", "3"):
        assert summary["finetune"][e] == original["finetune"][e]
        mine, theirs = _npz(out / f"personal_ft{e}.npz"), _npz(source / f"personal_ft{e}.npz")
        assert mine.keys() == theirs.keys()
        for key in mine:
            np.testing.assert_array_equal(mine[key], theirs[key])
    # FT 0 is the cluster model under its mask: every masked kernel entry is 0, and two
    # clients of one cluster start from the same model
    start = _npz(out / "personal_ft0.npz")
    clusters = json.loads((out / "clusters.json").read_text())
    masks = _npz(out / "masks.npz")
    for cid, c in clusters.items():
        for k, layer in enumerate((0, 2, 4, 6)):
            assert np.all(start[f"client{cid}_{layer}"][masks[f"cluster{c}_{k}"] == 0] == 0)
    same = [cid for cid, c in clusters.items() if c == clusters["1"]]
    if len(same) > 1:
        np.testing.assert_array_equal(start[f"client{same[0]}_0"], start[f"client{same[1]}_0"])
    # what did not change is the source's; the record says where it came from
    for key in ("comm_mb_eq13", "clusters", "phases", "params", "cluster_sparsity"):
        assert summary[key] == original[key]
    assert summary["wall_s"] == pytest.approx(original["wall_s"] + summary["finetune_wall_s"])
    config = json.loads((out / "config.json").read_text())
    assert config["ft_epochs"] == [0, 1, 2, 3]
    assert (out / config["finetuned_from"]["run"]).resolve() == source.resolve()
    for name in (
        "metrics.csv",
        "checkpoint.npz",
        "clusters.json",
        "masks.npz",
        "cluster_models.npz",
    ):
        assert (out / name).read_bytes() == (source / name).read_bytes()
    assert summary["deploy"]["models"]["3"] == "personal_ft3.npz"
    # TensorBoard: the source's rounds, each once, and every new fine-tuning length
    from fedprune.runs.events import read_tags

    tags, theirs = read_tags(out), read_tags(source)
    rounds = {tag: steps for tag, steps in theirs.items() if not tag.startswith("finetune/")}
    assert {tag: tags[tag] for tag in rounds} == rounds
    assert sorted(tags["finetune/personal_accuracy"]) == [0, 1, 2, 3]
    # a finished one is returned as it is, without fine-tuning again
    monkeypatch.setattr(R, "finetune_personal", lambda *a, **k: pytest.fail("fine-tuned"))
    assert R.refinetune(source, (0, 1, 2, 3), out, data_dir) == summary


def test_another_source_or_lengths_into_the_same_folder_is_refused(caafp_run, tmp_path, data_dir):
    source, _ = caafp_run
    out = tmp_path / "again"
    R.refinetune(source, (1,), out, data_dir, progress=False)
    with pytest.raises(ConfigError, match="differs in: ft_epochs"):
        R.refinetune(source, (2,), out, data_dir, progress=False)


def test_clusterfl_starts_from_its_clients_own_models(tff_context, tmp_path, data_dir):
    config = ClusterFLConfig(
        "uci_har", rounds=1, clusters=2, clients_per_round=3, local_epochs=1, ft_epochs=(2,)
    )
    original = run_clusterfl(config, tmp_path / "run", data_dir, progress=False)
    summary = R.refinetune(tmp_path / "run", (2, 4), tmp_path / "again", data_dir, progress=False)
    assert summary["finetune"]["2"] == original["finetune"]["2"]
    assert set(summary["finetune"]) == {"2", "4"} and summary["sparsity"] == 0.0
    assert not (tmp_path / "again" / "masks.npz").exists()
    # a fine-tuned-again run is a source in turn (it keeps the checkpoint's W)
    third = R.refinetune(tmp_path / "again", (4,), tmp_path / "third", data_dir, progress=False)
    assert third["finetune"]["4"] == summary["finetune"]["4"]
