"""The names of the files in a run directory, in one place.

============================  =====================================================  ==========
file                          holds                                                  written by
============================  =====================================================  ==========
``config.json``               the run's configuration (resume refuses another one)  every run
``metrics.csv``               one row per round (and cluster) or iteration          every run
``checkpoint.npz``            the state after the last finished round; AS-CFL's,    round-based
                              CFL's, IFCA's and FedCRef's runs remove it at the end  methods
``summary.json``              final numbers and the ``deploy`` manifest             every run
``clusters.json``             client id -> cluster                                   clustered
``cluster_choice.json``       how ``--clusters auto`` chose K (silhouette per K)     pipeline,
                                                                                     IFCA, CFL-K
``local_k.json``              how ``--local-k auto`` chose each client's K_i         FedCRef
``reclusters.json``           each split/merge pass of ``--recluster split-merge``  pipeline
``masks.npz``                 kernel masks per cluster (uint8)                       pipeline
``cluster_models.npz``        each cluster's model: before fine-tuning (pipeline),   pipeline,
                              the final ones (AS-CFL, CFL, IFCA: they deploy them)   clustered
``personal_ft<E>.npz``        each client's model after E fine-tuning epochs         personal
``community_models.npz``      FedCRef's community autoencoders                       FedCRef
``assignments.npz``           FedCRef's final local clusters per client             FedCRef
``labels.npz``                each client's objects' clusters (and their rows)      one-shot
``assigner.npz``              what labels a new sample of each client (encoding)    one-shot
``model.json``                your own model's architecture (Keras ``to_json``)      your model
``dataset.npz``               your own data given to the Python API as arrays        your data
                              (a hard link to its one copy in the store)
``dataset.json``              that data's content hash and store file                your data
``tensorboard/``              TensorBoard event files of the metrics rows            every run
``curves.png``                the metrics rows as curves (``fedprune plot``)         ``train``
``tff-logs/``                 the TFF workers' logs                                  every run
``.fedprune.lock``            present while a process owns the folder (its pid)      every run
============================  =====================================================  ==========
"""

from __future__ import annotations

CONFIG = "config.json"
METRICS = "metrics.csv"
CHECKPOINT = "checkpoint.npz"
SUMMARY = "summary.json"
CLUSTERS = "clusters.json"
CLUSTER_CHOICE = "cluster_choice.json"
RECLUSTERS = "reclusters.json"
LOCAL_K = "local_k.json"
MASKS = "masks.npz"
CLUSTER_MODELS = "cluster_models.npz"
COMMUNITY_MODELS = "community_models.npz"
ASSIGNMENTS = "assignments.npz"
LABELS = "labels.npz"
ASSIGNER = "assigner.npz"
WORKER_LOGS = "tff-logs"
EVENTS = "tensorboard"
MODEL_ARCHITECTURE = "model.json"
USER_DATASET = "dataset.npz"
USER_DATASET_RECORD = "dataset.json"

STARTED = (CHECKPOINT, METRICS, SUMMARY)  # a run with any of these has trained a round


def personal_file(epochs: int) -> str:
    """The file of the personal models after ``epochs`` epochs of fine-tuning."""
    return f"personal_ft{epochs}.npz"


PERSONAL_PATTERN = r"personal_ft(\d+)\.npz"
