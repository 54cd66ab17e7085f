"""The reproduction studies on the shared runner (the CA-AFP robustness studies, AS-CFL,
Fed-HIRE, fedprune's own studies) by command name (``fedprune reproduce NAME``), imported
on use so ``--help`` stays fast. ``reproduce table2`` and ``reproduce fedcref`` are
:class:`~fedprune.reproduce.study.Study` objects too (:func:`fedprune.reproduce.table2.study`,
:data:`fedprune.reproduce.fedcref.STUDY`), with commands of their own: Table 2 has one study
per ``--split``."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from fedprune.lazy import resolve

if TYPE_CHECKING:  # the command line imports this module: no numpy at --help
    from fedprune.reproduce.study import Study


class StudyCommand(NamedTuple):
    """What ``fedprune reproduce NAME --help`` says of a study without importing it (a test
    checks ``seeds`` and ``quick_seeds`` against the study itself)."""

    target: str  # module:attribute of the Study
    summary: str
    description: str
    seeds: int  # the study's default --seeds (the paper's number)
    quick: str  # what --quick trains


STUDIES = {
    "score-ablation": StudyCommand(
        "fedprune.reproduce.score_ablation:STUDY",
        "importance-score ablation (CA-AFP Tables 3, 4, 8) on UCI-HAR and WISDM",
        "CA-AFP K=3, 15 rounds, E=1, sparsity 0.3->0.7 every 5 rounds, no fine-tuning, for "
        "the 7 (alpha, beta, gamma) triples x Standard/Noisy/Drift x both datasets (42 runs, "
        "one seed as the paper); writes score_ablation.md/.csv/.png.",
        1,
        "the same 42 runs (the paper's study is one seed already)",
    ),
    "phases": StudyCommand(
        "fedprune.reproduce.phases:STUDY",
        "phase sensitivity (CA-AFP Figure 2, Table 7) on WISDM",
        "Studies A (start sparsity 0.0-0.9), B (P2 0-20) and C (P1 0-20) with P3=40 and 3 "
        "fine-tuning epochs, 3 seeds; writes phases.md/.csv/.png.",
        3,
        "seed 0 and a smaller grid: start 0.0/0.3/0.5/0.7/0.9, P1 and P2 0/10/20",
    ),
    "finetune": StudyCommand(
        "fedprune.reproduce.finetune:STUDY",
        "fine-tuning study (CA-AFP Figure 3, Table 9) on WISDM",
        "Six methods with Table 2's arguments, fine-tuned 0-25 epochs from one run each, "
        "5 seeds; writes finetune.md/.csv/.png.",
        5,
        "seed 0",
    ),
    "noniid": StudyCommand(
        "fedprune.reproduce.noniid:STUDY",
        "non-IID robustness (CA-AFP Figure 4, Table 10) on WISDM",
        "Six methods with k = 1, 2, 3 classes per client, 50 rounds, 70 %, no fine-tuning, "
        "5 seeds; writes noniid.md/.csv/.png.",
        5,
        "seed 0",
    ),
    "fedhire": StudyCommand(
        "fedprune.reproduce.fedhire:STUDY",
        "Fed-HIRE and k-FED on the 10 UCI tables (Fed-HIRE Tables 3-4), authors' splits",
        "Table 3 (Fed-HIRE, k-FED; 10 seeds, --quick 3) and Table 4's ablation (k-means in "
        "place of FCPL and/or MCPL, six tables); writes fedhire.md/.csv/.png.",
        10,
        "seeds 0-2, Table 3 only",
    ),
    "ascfl": StudyCommand(
        "fedprune.reproduce.ascfl:STUDY",
        "AS-CFL with CFL, CFL fixed-K, IFCA, FedAvg (AS-CFL §4.2-4.4), scaled setting",
        "Main comparison (MNIST, Fashion-MNIST, alpha 0.4), alpha sweep, ablation, theta "
        "stability, 10 % dropout, rotation-only ARI; 3 seeds; writes ascfl.md/.csv/.png.",
        3,
        "seed 0: the main comparison on MNIST and the rotation-only run",
    ),
    "autok": StudyCommand(
        "fedprune.reproduce.autok:STUDY",
        "the number of clusters chosen from the data (--clusters auto, --local-k auto) "
        "against the papers' fixed K",
        "CA-AFP on Table 2's cells and non-IID WISDM (k = 1, 2, 3), IFCA on rotated MNIST "
        "(label-skewed and rotation-only, ARI), FedCRef on its three datasets; fixed K "
        "against auto, 5 seeds; writes autok.md/.csv/.png.",
        5,
        "seed 0",
    ),
    "device": StudyCommand(
        "fedprune.reproduce.device:STUDY",
        "what pruning costs in accuracy and buys on the device: Table 2's CA-AFP cells, "
        "per-weight and structured masks, the small model, exported and measured",
        "CA-AFP (0,0,50) on UCI-HAR and WISDM, FT 3 and 25, for the paper's model with "
        "per-weight masks at 70 %, structured masks (--structure filters) at 50/70/85 % and "
        "--model har_cnn_small; each run exported (int8 per client: size, TFLite Micro arena, "
        "LiteRT time; Cortex-M4 instructions under QEMU where the Arm toolchain and a TFLite "
        "Micro tree are found: $FEDPRUNE_TFLM_DIR, $FEDPRUNE_CMSIS_DIR), 5 seeds; writes "
        "device.md/.csv/.png.",
        5,
        "seed 0",
    ),
}


def study(name: str) -> Study:
    return resolve(STUDIES[name].target)
