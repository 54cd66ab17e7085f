"""Bad input to ``fedprune``: every case exits 2 with exactly one ``error:`` line that names
what to fix, and leaves nothing behind (no new run directory; an existing run unchanged).

One table: each case is (name, how to prepare it, the command line, a fragment of the error).
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from fedprune.cli import main
from tests.conftest import har_arrays, write_uci_har

pytestmark = pytest.mark.slow

FEDAVG = ["train", "fedavg", "--dataset", "uci_har", "--rounds", "1", "--clients-per-round", "2"]
FEDAVG += ["--local-epochs", "1", "--no-progress"]
CAAFP = ["train", "caafp", "--dataset", "uci_har", "--phases", "1,0,0", "--ft-epochs", "1"]
CAAFP += ["--no-progress"]
CLUSTERFL = ["train", "clusterfl", "--dataset", "uci_har", "--rounds", "1", "--no-progress"]
ASCFL = ["train", "ascfl", "--rounds", "1", "--warmup-rounds", "0", "--no-progress"]
FEDHIRE = ["train", "fedhire", "--dataset", "ecoli", "--no-progress"]
FEDCREF = ["train", "fedcref", "--clients", "2", "--samples-per-class", "2", "--no-progress"]


def _nothing(tmp: Path, finished: Path) -> None:
    """No preparation."""


def _nan_in_uci_har(tmp: Path, finished: Path) -> None:
    """The fixture's UCI-HAR with one value replaced by nan (subject 2, channel 0)."""
    x, y, subject = har_arrays(6, subjects=tuple(range(1, 7)))
    x[13, 5, 0] = np.nan
    folder = tmp / "nan-data" / "uci_har"
    folder.mkdir(parents=True)
    write_uci_har(folder, x, y, subject)


def _user_npz(tmp: Path, finished: Path) -> None:
    """Your own windows as TMP/mine.npz, with one nan (window 7, step 2, channel 1)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 16, 3)).astype(np.float32)
    x[7, 2, 1] = np.nan
    y, ids = np.tile([0, 1], 20), np.repeat([1, 2], 20)
    np.savez(tmp / "mine.npz", x=x, y=y, client_id=ids)


def _one_client_npz(tmp: Path, finished: Path) -> None:
    """Your own windows of one client as TMP/one.npz."""
    x = np.random.default_rng(0).normal(size=(40, 16, 3)).astype(np.float32)
    np.savez(tmp / "one.npz", x=x, y=np.tile([0, 1], 20), client_id=np.ones(40, np.int64))


def _file_as_out(tmp: Path, finished: Path) -> None:
    (tmp / "a-file").write_text("not a directory\n")


def _copy_run(damage: Callable[[Path], None]) -> Callable[[Path, Path], None]:
    def prepare(tmp: Path, finished: Path) -> None:
        shutil.copytree(finished, tmp / "run")
        damage(tmp / "run")

    return prepare


def _truncate(name: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        data = (run / name).read_bytes()
        (run / name).write_bytes(data[: len(data) // 2])

    return damage


def _unfinished(damage: Callable[[Path], None]) -> Callable[[Path], None]:
    def both(run: Path) -> None:
        (run / "summary.json").unlink()  # so that the run resumes and reads its files
        damage(run)

    return both


def _garbage_metrics_row(run: Path) -> None:
    with open(run / "metrics.csv", "a") as f:
        f.write("garbage\n")


def _caafp_record(tmp: Path, finished: Path) -> None:
    """A finished run folder whose config.json is a CA-AFP run's (fedprune finetune's
    checks read only config.json and summary.json before anything else)."""
    import dataclasses
    import json

    from fedprune.configs.pipeline import CAAFPConfig

    shutil.copytree(finished, tmp / "run")
    config = dataclasses.asdict(CAAFPConfig("uci_har", split="time-ordered", standardize=False))
    (tmp / "run" / "config.json").write_text(json.dumps(config))


# --- checkpoints, counts, non-finite sensor values, --out, files that are not UTF-8 ---------
WISDM = ["train", "fedavg", "--dataset", "wisdm", "--rounds", "1", "--clients-per-round", "2"]
WISDM += ["--local-epochs", "1", "--no-progress", "--data-dir", "TMP/wisdm-data"]
# the kernels of the HAR CNN on WISDM (200 x 3 windows): a checkpoint of another dataset's run
WISDM_MODEL = [(5, 3, 64), (64,), (5, 64, 64), (64,), (3200, 32), (32,), (32, 6), (6,)]


def _checkpoint(change: Callable[[dict], None]) -> Callable[[Path], None]:
    """Damage: the run's checkpoint.npz rewritten with ``change`` applied to its arrays."""

    def damage(run: Path) -> None:
        with np.load(run / "checkpoint.npz") as z:
            flat = {key: z[key] for key in z.files}
        change(flat)
        np.savez(run / "checkpoint.npz", **flat)

    return damage


def _nan_weight(flat: dict) -> None:
    flat["trainable__0"] = flat["trainable__0"].copy()
    flat["trainable__0"].flat[7] = np.nan


def _no_weights(flat: dict) -> None:
    for key in [k for k in flat if k.startswith("trainable__")]:
        del flat[key]


def _not_utf8(name: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        with open(run / name, "ab") as f:
            f.write(b"\xff\n")

    return damage


def _recorded_run(
    config: Callable[[], object], arrays: dict | Callable[[], dict]
) -> Callable[[Path, Path], None]:
    """TMP/run as the command for ``config()`` leaves it after round 1, with a checkpoint of
    ``arrays`` (or of what ``arrays()`` gives then; no training needed to reach the
    checkpoint's checks)."""

    def prepare(tmp: Path, finished: Path) -> None:
        import dataclasses

        from fedprune.configs.protocol import with_protocol
        from fedprune.runs import RunDir

        run = RunDir(tmp / "run", dataclasses.asdict(with_protocol(config(), None)))
        run.save_checkpoint(1, arrays() if callable(arrays) else arrays)
        (run.path / "tff-logs").mkdir()
        (run.path / "tff-logs" / "worker-0.log").touch()

    return prepare


def _uci_har_weights() -> list[np.ndarray]:
    """Zero weights of the HAR CNN on UCI-HAR windows (128 x 9, 6 classes)."""
    from fedprune.models.cnn1d import build_har_cnn

    return [np.zeros_like(w) for w in build_har_cnn((128, 9), 6, seed=0).get_weights()]


def _caafp_cluster_5_of_3() -> dict:
    """A CA-AFP checkpoint of this model whose assignment names cluster 5 of K = 3."""
    weights = _uci_har_weights()
    arrays = {"global": weights, "assignment": [np.array([0, 1, 2, 5, 0, 1])]}
    for c in range(3):
        arrays[f"cluster{c}_w"] = arrays[f"cluster{c}_m"] = weights
    return arrays


def _clusterfl_label_minus_1() -> dict:
    """A ClusterFL checkpoint of this model whose client 2 is in cluster -1."""
    size = sum(w.size for w in _uci_har_weights())
    flat = {k: [np.zeros((6, size), np.float32)] for k in ("w", "u", "omega")}
    return {**flat, "labels": [np.array([0, 1, -1, 0, 1, 2])]}


def _caafp_config() -> object:
    from fedprune.configs.pipeline import CAAFPConfig

    return CAAFPConfig("uci_har", phases=(1, 0, 0), ft_epochs=(1,), clients_per_round=2)


def _clusterfl_config() -> object:
    from fedprune.configs.clusterfl import ClusterFLConfig

    return ClusterFLConfig("uci_har", rounds=1, clients_per_round=2)


def _wisdm_with(value: str) -> Callable[[Path, Path], None]:
    """The fixture's WISDM raw file (as tests/conftest.py makes it) with ``value`` as z of
    line 6."""

    def prepare(tmp: Path, finished: Path) -> None:
        from tests.conftest import wisdm_text

        lines = wisdm_text().splitlines()
        lines[5] = lines[5].rsplit(",", 1)[0] + f",{value};"
        folder = tmp / "wisdm-data" / "wisdm"
        folder.mkdir(parents=True)
        (folder / "WISDM_ar_v1.1_raw.txt").write_text("\n".join(lines) + "\n")

    return prepare


def _dangling_link(tmp: Path, finished: Path) -> None:
    (tmp / "link").symlink_to(tmp / "nowhere")


def _table_npz(tmp: Path, finished: Path) -> None:
    """Your own table of 3 clients (10 objects of 2 features each) as TMP/table.npz."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(c, 0.1, (10, 2)) for c in range(3)])
    np.savez(tmp / "table.npz", x=x, client_id=np.repeat([1, 2, 3], 10), y=np.repeat([0, 1, 2], 10))


FEDCREF_TABLE = ["train", "fedcref", "--dataset", "TMP/table.npz", "--no-progress"]
FINETUNE = ["finetune", "TMP/run", "--no-progress"]

# name: (prepare, argv (OUT, DATA, TMP are replaced), fragment of the error line)
CASES = {
    "lr nan": (_nothing, FEDAVG + ["--lr", "nan"], "--lr must be a finite number"),
    "lr inf": (_nothing, FEDAVG + ["--lr", "inf"], "--lr must be a finite number"),
    "lr 0 (clusterfl)": (_nothing, CLUSTERFL + ["--lr", "0"], "--lr must be in (0, inf)"),
    "prox nan": (_nothing, CAAFP + ["--prox", "nan"], "--prox must be a finite number"),
    "seed -1": (_nothing, FEDAVG + ["--seed", "-1"], "--seed must be an integer in [0"),
    "churn 2": (_nothing, CAAFP + ["--churn", "2"], "--churn must be in [0, 1]"),
    "clients-per-round 0": (
        _nothing,
        FEDAVG + ["--clients-per-round", "0"],
        "--clients-per-round must be an integer >= 1, got 0",
    ),
    "clusterfl Omega step": (
        _nothing,
        CLUSTERFL + ["--alpha", "0", "--beta", "0.01"],
        "must be > 0 for the Omega step",
    ),
    "scoring weights not all given": (_nothing, CAAFP + ["--alpha", "0.5"], "all of --alpha"),
    "label noise 0": (_nothing, FEDAVG + ["--label-noise", "0,0.3"], "--label-noise must be"),
    "label noise one value": (_nothing, FEDAVG + ["--label-noise", "0.4"], "expected 2 values"),
    "label noise selects no client": (
        _nothing,
        FEDAVG + ["--label-noise", "0.01,0.3"],
        "selects 0 of 6 clients",
    ),
    "classes per client 6": (
        _nothing,
        CAAFP + ["--classes-per-client", "6"],
        "--classes-per-client must be an integer in [1, 5]",
    ),
    "split unknown": (_nothing, FEDAVG + ["--split", "shuffled"], "--split"),
    "unknown prune layer": (_nothing, CAAFP + ["--prune-layers", "fc"], "--prune-layers"),
    "fedcref epochs 0": (_nothing, FEDCREF + ["--epochs", "0"], "--epochs must be an integer"),
    "fedcref dirtiness 1": (_nothing, FEDCREF + ["--dirtiness", "1"], "--dirtiness must be in"),
    "clusters above clients": (
        _nothing,
        CAAFP + ["--clusters", "40"],
        "--clusters must be at most 6",
    ),
    "clusters 0": (
        _nothing,
        CAAFP + ["--clusters", "0"],
        "--clusters must be an integer K >= 1 or auto, got 0",
    ),
    "clusters neither a number nor auto": (
        _nothing,
        CAAFP + ["--clusters", "many"],
        "--clusters: expected an integer K >= 1 or auto, got 'many'",
    ),
    "max clusters 1": (
        _nothing,
        CAAFP + ["--clusters", "auto", "--max-clusters", "1"],
        "--max-clusters must be an integer >= 2, got 1",
    ),
    "max clusters without auto": (
        _nothing,
        CAAFP + ["--max-clusters", "4"],
        "--max-clusters: not used by `fedprune train caafp` with the options given",
    ),
    "max clusters above the clients": (
        _nothing,
        CAAFP + ["--clusters", "auto", "--max-clusters", "6"],
        "--max-clusters must be at most 5 (uci_har's clients - 1: the silhouette scores K up "
        "to N - 1), got 6",
    ),
    "clusters auto with one client": (
        _one_client_npz,
        CAAFP[:2]
        + ["--dataset", "TMP/one.npz"]
        + CAAFP[4:]
        + ["--clusters", "auto", "--clients-per-round", "1"],
        "--clusters auto needs at least 3 clients to choose K (the silhouette scores "
        "K = 2..N - 1), one.npz's clients are 1; give --clusters 1",
    ),
    "cluster signal unknown": (
        _nothing,
        CAAFP + ["--cluster-signal", "gradients"],
        "--cluster-signal: invalid choice: 'gradients'",
    ),
    "nan in UCI-HAR": (
        _nan_in_uci_har,
        FEDAVG + ["--data-dir", "TMP/nan-data"],
        "body_acc_x_train.txt",
    ),
    "dataset neither built in nor npz": (
        _nothing,
        FEDAVG[:2] + ["--dataset", "TMP/mine.csv"] + FEDAVG[4:],
        "--dataset must be one of uci_har, wisdm or the path of your own .npz file",
    ),
    "dataset npz missing": (
        _nothing,
        FEDAVG[:2] + ["--dataset", "TMP/mine.npz"] + FEDAVG[4:],
        "mine.npz: cannot read it (No such file or directory)",
    ),
    "dataset npz with nan": (
        _user_npz,
        FEDAVG[:2] + ["--dataset", "TMP/mine.npz"] + FEDAVG[4:],
        "x[7, 2, 1] = nan is not a finite float32 number",
    ),
    "missing data dir": (_nothing, FEDAVG + ["--data-dir", "TMP/no-such-dir"], "does not exist"),
    "out is a file": (_file_as_out, FEDAVG + ["--out", "TMP/a-file"], "is a file"),
    "out below a file": (_file_as_out, FEDAVG + ["--out", "TMP/a-file/run"], "is a file"),
    "plain-text remote worker": (
        _nothing,
        FEDAVG + ["--remote-worker", "127.0.0.1:9"],
        "--insecure-remote",
    ),
    "truncated checkpoint": (
        _copy_run(_unfinished(_truncate("checkpoint.npz"))),
        FEDAVG + ["--out", "TMP/run"],
        "checkpoint.npz is damaged",
    ),
    "truncated summary": (
        _copy_run(_truncate("summary.json")),
        FEDAVG + ["--out", "TMP/run"],
        "summary.json is damaged",
    ),
    "truncated config": (
        _copy_run(_truncate("config.json")),
        FEDAVG + ["--out", "TMP/run"],
        "config.json is damaged",
    ),
    "garbage metrics row": (
        _copy_run(_unfinished(_garbage_metrics_row)),
        FEDAVG + ["--out", "TMP/run"],
        "metrics.csv, line 3",
    ),
    "training diverges": (
        _nothing,
        FEDAVG + ["--lr", "1e38", "--local-epochs", "3"],
        "round 1: training diverged",
    ),
    "ascfl alpha 0": (_nothing, ASCFL + ["--alpha", "0"], "--alpha must be in (0, inf)"),
    "ascfl min above max": (
        _nothing,
        ASCFL + ["--min-frac", "0.7", "--max-frac", "0.5"],
        "--min-frac 0.7 is above --max-frac 0.5",
    ),
    "ascfl split below merge": (
        _nothing,
        ASCFL + ["--split-threshold", "0.2", "--merge-threshold", "0.3"],
        "must be above --merge-threshold",
    ),
    "ascfl noise without clip": (
        _nothing,
        ASCFL + ["--noise-multiplier", "1"],
        "--noise-multiplier needs --clip-norm",
    ),
    "ascfl theta above 1": (_nothing, ASCFL + ["--theta", "1.5"], "--theta must be in (0, 1]"),
    "ascfl missing dataset": (_nothing, ASCFL, "mnist"),
    "ascfl unknown update reference": (
        _nothing,
        ASCFL + ["--update-reference", "global"],
        "--update-reference: invalid choice: 'global'",
    ),
    "ascfl unknown epochs rule": (
        _nothing,
        ASCFL + ["--epochs-rule", "adaptive"],
        "--epochs-rule: invalid choice: 'adaptive'",
    ),
    "ascfl unknown merge guard": (
        _nothing,
        ASCFL + ["--merge-guard", "union"],
        "--merge-guard: invalid choice: 'union'",
    ),
    "ascfl unknown stage1": (
        _nothing,
        ASCFL + ["--stage1", "never"],
        "--stage1: invalid choice: 'never'",
    ),
    "ascfl unknown late-clients rule": (
        _nothing,
        ASCFL + ["--late-clients", "nearest"],
        "--late-clients: invalid choice: 'nearest'",
    ),
    "ascfl warm-up as long as the run": (
        _nothing,
        ASCFL + ["--warmup-rounds", "1"],
        "--warmup-rounds 1 leaves none of the 1 rounds to cluster",
    ),
    "ascfl unknown low-rank layers": (
        _nothing,
        ASCFL + ["--low-rank-layers", "conv"],
        "--low-rank-layers: invalid choice: 'conv'",
    ),
    "ascfl unknown split guard": (
        _nothing,
        ASCFL + ["--split-guard", "always"],
        "--split-guard: invalid choice: 'always'",
    ),
    "ifca more clusters than clients": (
        _nothing,
        ["train", "ifca", "--rounds", "1", "--no-progress", "--clusters", "21"],
        "--clusters must be at most 20 (--clients), got 21",
    ),
    "cfl given AS-CFL-only options": (
        _nothing,
        ["train", "cfl", "--rounds", "1", "--no-progress", "--theta", "0.8", "--clusters", "3"],
        "--theta, --clusters: not used by `fedprune train cfl` with the options given; leave "
        "them out",
    ),
    "ascfl late-clients rule without dropout": (
        _nothing,
        ASCFL + ["--late-clients", "follow"],
        "--late-clients: not used by `fedprune train ascfl` with the options given; leave it",
    ),
    "fedcref dirtiness with kmeans-ae init": (
        _nothing,
        FEDCREF + ["--init", "kmeans-ae", "--dirtiness", "0.2"],
        "--dirtiness: not used by `fedprune train fedcref`",
    ),
    # options the method does not use, and FedCRef's --local-k on your own table
    "caafp signal options with one cluster": (
        _nothing,
        CAAFP + ["--clusters", "1", "--cluster-signal-noise", "1", "--cluster-signal-clip", "1"],
        "--cluster-signal-noise, --cluster-signal-clip: not used by `fedprune train caafp`",
    ),
    "kfed eta": (
        _nothing,
        ["train", "kfed", "--dataset", "ecoli", "--no-progress", "--eta", "0.1"],
        "--eta: not used by `fedprune train kfed` with the options given; leave it out",
    ),
    "ascfl clusters": (
        _nothing,
        ASCFL + ["--clusters", "3"],
        "--clusters: not used by `fedprune train ascfl` with the options given; leave it out",
    ),
    "fedcref local-k -1": (
        _table_npz,
        FEDCREF_TABLE + ["--local-k", "-1"],
        "--local-k must be an integer >= 2, got -1",
    ),
    "fedcref local-k 0": (
        _table_npz,
        FEDCREF_TABLE + ["--local-k", "0"],
        "--local-k must be an integer >= 2, got 0",
    ),
    "fedcref local-k not an integer": (
        _table_npz,
        FEDCREF_TABLE + ["--local-k", "1e12"],
        "--local-k: expected an integer K >= 2 or auto, got '1e12'",
    ),
    "fedcref local-k in capitals": (
        _table_npz,
        FEDCREF_TABLE + ["--local-k", "AUTO"],
        "--local-k: expected an integer K >= 2 or auto, got 'AUTO'",
    ),
    "fedcref local-k 2.0": (
        _table_npz,
        FEDCREF_TABLE + ["--local-k", "2.0"],
        "--local-k: expected an integer K >= 2 or auto, got '2.0'",
    ),
    "fedhire eta 0": (_nothing, FEDHIRE + ["--eta", "0"], "--eta must be in (0, inf)"),
    "fedhire k0 ratio 0": (_nothing, FEDHIRE + ["--k0-ratio", "0"], "--k0-ratio must be in"),
    "fedhire k-star 1": (_nothing, FEDHIRE + ["--k-star", "1"], "--k-star must be an integer >= 2"),
    "fedhire missing table": (_nothing, FEDHIRE, "ecoli"),
    "finetune a run without personal models": (
        _copy_run(lambda run: None),
        FINETUNE + ["--ft-epochs", "1"],
        "is a fedavg run, which has no personal models to fine-tune; pass a run of caafp",
    ),
    "finetune no run": (_nothing, FINETUNE + ["--ft-epochs", "1"], "is not a fedprune run"),
    "finetune unfinished run": (
        _copy_run(lambda run: (run / "summary.json").unlink()),
        FINETUNE + ["--ft-epochs", "1"],
        "the run has not finished",
    ),
    "finetune ft-epochs -1": (_caafp_record, FINETUNE + ["--ft-epochs", "3,-1"], "--ft-epochs"),
    "finetune ft-epochs not integers": (
        _caafp_record,
        FINETUNE + ["--ft-epochs", "3,x"],
        "expected comma-separated integers",
    ),
    "finetune into the run itself": (
        _caafp_record,
        FINETUNE + ["--ft-epochs", "1", "--out", "TMP/run"],
        "is the source run itself; choose a new folder",
    ),
    "different configuration": (
        _copy_run(lambda run: None),
        FEDAVG + ["--out", "TMP/run", "--lr", "0.01"],
        "holds a run with a different configuration",
    ),
    # `fedprune worker --port` rows: tests/workers/test_fail_closed.py (no --out/--data-dir)
    "remote-timeout -1": (
        _nothing,
        FEDAVG + ["--remote-timeout", "-1"],
        "argument --remote-timeout: must be a positive finite number of seconds",
    ),
    "remote-timeout nan": (
        _nothing,
        FEDAVG + ["--remote-timeout", "nan"],
        "argument --remote-timeout: must be a positive finite number of seconds",
    ),
    "remote-timeout inf": (
        _nothing,
        FEDAVG + ["--remote-timeout", "inf"],
        "argument --remote-timeout: must be a positive finite number of seconds",
    ),
    "remote-worker port 70000": (
        _nothing,
        FEDAVG + ["--remote-worker", "127.0.0.1:70000"],
        "argument --remote-worker: the port must be in [1, 65535]",
    ),
    # checkpoints: finite, round within the run, the model's shapes, every array there
    "checkpoint with nan weights": (
        _copy_run(_unfinished(_checkpoint(_nan_weight))),
        FEDAVG + ["--out", "TMP/run"],
        "checkpoint.npz holds non-finite numbers ('trainable' array 0: 1 value)",
    ),
    "checkpoint with an inf scalar": (
        _copy_run(_unfinished(_checkpoint(lambda f: f.update(scalar__comm_bytes=np.inf)))),
        FEDAVG + ["--out", "TMP/run"],
        "checkpoint.npz holds non-finite numbers (scalar 'comm_bytes' is inf)",
    ),
    "checkpoint beyond --rounds": (
        _copy_run(_unfinished(_checkpoint(lambda f: f.update(round=np.array(99))))),
        FEDAVG + ["--out", "TMP/run"],
        "checkpoint.npz is at round 99, beyond the 1 round of this run (--rounds); give the "
        "--rounds it was made with, or move it away",
    ),
    "checkpoint round below 0": (
        _copy_run(_unfinished(_checkpoint(lambda f: f.update(round=np.array(-1))))),
        FEDAVG + ["--out", "TMP/run"],
        "checkpoint.npz is damaged (its round is -1, below 0); move it away",
    ),
    "checkpoint of another shape": (
        _copy_run(_unfinished(_checkpoint(lambda f: f.update(trainable__0=np.zeros(3))))),
        FEDAVG + ["--out", "TMP/run"],
        "checkpoint.npz does not fit this run ('trainable' array 0 has shape (3,), this run's is",
    ),
    "checkpoint without weights": (
        _copy_run(_unfinished(_checkpoint(_no_weights))),
        FEDAVG + ["--out", "TMP/run"],
        "checkpoint.npz is damaged (it lacks 'trainable')",
    ),
    "caafp checkpoint of a wisdm run": (
        _recorded_run(_caafp_config, {"global": [np.zeros(s, np.float32) for s in WISDM_MODEL]}),
        CAAFP + ["--clients-per-round", "2", "--out", "TMP/run"],
        "'global' array 0 has shape (5, 3, 64), this run's is (5, 9, 64)",
    ),
    "clusterfl checkpoint of another model": (
        _recorded_run(
            _clusterfl_config,
            {
                **{k: [np.zeros((6, 10), np.float32)] for k in ("w", "u", "omega")},
                "labels": [np.zeros(6, np.int64)],
            },
        ),
        CLUSTERFL + ["--clients-per-round", "2", "--out", "TMP/run"],
        "checkpoint.npz does not fit this run ('w' array 0 has shape (6, 10), this run's is (6,",
    ),
    "caafp checkpoint naming a cluster it lacks": (
        _recorded_run(_caafp_config, _caafp_cluster_5_of_3),
        CAAFP + ["--clients-per-round", "2", "--out", "TMP/run"],
        "checkpoint.npz is damaged ('assignment' names cluster 5; this run has clusters 0 to 2)",
    ),
    "clusterfl checkpoint with a negative cluster": (
        _recorded_run(_clusterfl_config, _clusterfl_label_minus_1),
        CLUSTERFL + ["--clients-per-round", "2", "--out", "TMP/run"],
        "checkpoint.npz is damaged ('labels' names cluster -1; this run has clusters 0 to 2)",
    ),
    # counts the data cannot meet: refused with the reachable maximum, never clamped
    "clients-per-round above clients": (
        _nothing,
        FEDAVG + ["--clients-per-round", "1000000"],
        "--clients-per-round must be at most 6 (uci_har's clients), got 1000000",
    ),
    "caafp clients-per-round above clients": (
        _nothing,
        CAAFP + ["--clients-per-round", "7"],
        "--clients-per-round must be at most 6 (uci_har's clients), got 7",
    ),
    "clusterfl clients-per-round above clients": (
        _nothing,
        CLUSTERFL + ["--clients-per-round", "7"],
        "--clients-per-round must be at most 6 (uci_har's clients), got 7",
    ),
    "caafp clients-per-round below clusters": (
        _nothing,
        CAAFP + ["--phases", "0,1,1", "--clients-per-round", "2"],
        "--clients-per-round 2 is below --clusters 3",
    ),
    "cfl-fixed clusters above clients": (
        _nothing,
        ["train", "cfl-fixed", "--rounds", "1", "--no-progress", "--clusters", "1000"],
        "--clusters must be at most 20 (the clients reporting in a round: --clients 20, "
        "--client-dropout 0), got 1000",
    ),
    "ascfl dropout leaves no client": (
        _nothing,
        ASCFL + ["--clients", "2", "--client-dropout", "0.8"],
        "--client-dropout 0.8 leaves none of the 2 clients (--clients) reporting in a round",
    ),
    "block above every kernel column": (
        _nothing,
        CAAFP + ["--clients-per-round", "2", "--block", "100000"],
        "--block must be at most 2048 (the fan-in of dense, the longest kernel pruned), got",
    ),
    "structure unknown": (
        _nothing,
        CAAFP + ["--structure", "channels"],
        "argument --structure: invalid choice: 'channels'",
    ),
    "structure without masked rounds": (
        _nothing,
        CAAFP + ["--structure", "filters"],
        "--structure filters: caafp with --phases 1,0,0 trains no masked rounds",
    ),
    "structure with blocks": (
        _nothing,
        CAAFP
        + ["--phases", "0,0,2", "--prune-frequency", "1", "--structure", "filters"]
        + ["--block", "16"],
        "--structure filters removes whole filters and units, --block 16 blocks of weights",
    ),
    "structure of the classifier only": (
        _nothing,
        CAAFP
        + ["--phases", "0,0,2", "--prune-frequency", "1", "--structure", "filters"]
        + ["--prune-layers", "probs", "--clients-per-round", "3"],
        "--structure filters: none of the pruned kernels has outputs another pruned kernel",
    ),
    "rounds 1e20": (_nothing, FEDAVG + ["--rounds", "1e20"], "--rounds: invalid int value: '1e20'"),
    "rounds beyond any count": (
        _nothing,
        FEDAVG + ["--rounds", "100000000000000000000"],
        "--rounds must be at most 2147483647 (the largest count fedprune takes)",
    ),
    "rounds negative": (_nothing, FEDAVG + ["--rounds", "-3"], "--rounds must be an integer >= 1"),
    "local epochs not an integer": (
        _nothing,
        FEDAVG + ["--local-epochs", "1.5"],
        "argument --local-epochs: invalid int value: '1.5'",
    ),
    "lr not a number": (_nothing, FEDAVG + ["--lr", "fast"], "--lr: invalid float value: 'fast'"),
    "phases not integers": (_nothing, CAAFP + ["--phases", "1,x,0"], "comma-separated integers"),
    "workers 0": (
        _nothing,
        FEDAVG + ["--workers", "0"],
        "argument --workers: must be an integer in [1, 2147483647], got 0",
    ),
    "workers not a number": (
        _nothing,
        FEDAVG + ["--workers", "two"],
        "argument --workers: expected an integer >= 1, got 'two'",
    ),
    "workers beyond the CPUs": (
        _nothing,
        FEDAVG + ["--workers", "100000"],
        "argument --workers: local TFF workers must be between 1 and this machine's",
    ),
    # non-finite sensor values: an error in WISDM as in UCI-HAR, naming file, line and value
    "nan in WISDM": (_wisdm_with("nan"), WISDM, "raw.txt, line 6: non-finite value 'nan'"),
    "inf in WISDM": (_wisdm_with("-inf"), WISDM, "raw.txt, line 6: non-finite value '-inf'"),
    "1e39 in WISDM": (_wisdm_with("1e39"), WISDM, "raw.txt, line 6: non-finite value '1e39'"),
    # --out
    "out empty": (_nothing, FEDAVG + ["--out", ""], "--out is empty; give the run's own folder"),
    "finetune out empty": (
        _caafp_record,
        FINETUNE + ["--ft-epochs", "1", "--out", ""],
        "--out is empty",
    ),
    "out a dangling link": (
        _dangling_link,
        FEDAVG + ["--out", "TMP/link"],
        "link is a symbolic link to",
    ),
    "out below a dangling link": (
        _dangling_link,
        FEDAVG + ["--out", "TMP/link/run"],
        "which does not exist; make that folder or choose another --out",
    ),
    # run files that are not UTF-8
    "metrics not UTF-8": (
        _copy_run(_unfinished(_not_utf8("metrics.csv"))),
        FEDAVG + ["--out", "TMP/run"],
        "metrics.csv, line 3: byte 0xff is not UTF-8 text",
    ),
    "config not UTF-8": (
        _copy_run(_not_utf8("config.json")),
        FEDAVG + ["--out", "TMP/run"],
        "config.json is damaged",
    ),
    "summary not UTF-8": (
        _copy_run(_not_utf8("summary.json")),
        FEDAVG + ["--out", "TMP/run"],
        "summary.json is damaged",
    ),
    "finetune config not UTF-8": (
        _copy_run(_not_utf8("config.json")),
        FINETUNE + ["--ft-epochs", "1"],
        "config.json is damaged",
    ),
    # FedCRef systems the data cannot hold (6 fixture classes of 40 images): refused before
    # any class subset is drawn, with the largest values that fit
    "fedcref clients above what the data holds": (
        __import__("tests.algorithms.test_fedcref_system_size", fromlist=["_"]).mnist_fixture,
        FEDCREF + ["--clients", "100000", "--data-dir", "TMP/images"],
        "at most 57 clients fit at --samples-per-class 2",
    ),
    "fedcref samples per class above what the data holds": (
        __import__("tests.algorithms.test_fedcref_system_size", fromlist=["_"]).mnist_fixture,
        FEDCREF + ["--samples-per-class", "100000", "--data-dir", "TMP/images"],
        "or at most 40 samples per class for 2 clients",
    ),
}


@pytest.fixture(scope="module")
def finished_fedavg(tmp_path_factory) -> tuple[Path, Path]:
    """A finished one-round FedAvg run on the fixture data, and that data directory."""
    root = tmp_path_factory.mktemp("finished")
    data = root / "data"
    (data / "uci_har").mkdir(parents=True)
    write_uci_har(data / "uci_har", *har_arrays(6, subjects=tuple(range(1, 7))), as_zip=True)
    run = root / "run"
    assert main(FEDAVG + ["--out", str(run), "--data-dir", str(data)]) == 0
    return run, data


def _snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
        for p in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_error_line_and_leaves_nothing(case, tmp_path, finished_fedavg, capsys):
    prepare, argv, fragment = CASES[case]
    finished, data_dir = finished_fedavg
    work = tmp_path / "work"
    work.mkdir()
    prepare(work, finished)
    args = [a.replace("TMP", str(work)) for a in argv]
    if "--out" not in args:
        args += ["--out", str(work / "out")]
    if "--data-dir" not in args:
        args += ["--data-dir", str(data_dir)]
    capsys.readouterr()
    before = _snapshot(work)
    try:
        rc = main(args)
    except SystemExit as exit_:  # argparse's own errors
        rc = exit_.code
    err = capsys.readouterr().err
    assert rc == 2, err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1, err
    assert fragment in errors[0], err
    assert "Traceback" not in err
    assert _snapshot(work) == before  # nothing made, nothing changed
