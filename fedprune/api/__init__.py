"""fedprune's Python API: your data, your Keras model, every method, one run directory.

::

    import fedprune as fp

    data = fp.from_arrays(x, y, client_ids)           # windows (N, T, C), labels, clients
    trainer = fp.caafp(data, model_fn=my_model, phases=(0, 0, 50))
    result = trainer.run("runs/mine")                 # resumable; the same files as the CLI
    result.summary["finetune"]["25"]["avg_acc"], result.models(), result.masks()

* data: :func:`from_arrays`, :func:`from_clients`, :func:`from_client_data`,
  :func:`read_npz` (:mod:`fedprune.data.user`) for labelled windows, :func:`from_table`
  (:mod:`fedprune.data.tables`) for the one-shot clustering methods' objects,
  :func:`from_images` / :func:`images_from_client_data` (:mod:`fedprune.data.user_images`)
  for the clustered-FL methods' images, or a built-in dataset's name;
* models: any ``model_fn(input_shape, num_classes)`` returning an uncompiled Keras model
  (:mod:`fedprune.models.user`);
* one builder per method (:mod:`fedprune.api.builders`), each returning a :class:`Trainer`;
  ``fedprune train`` runs the same trainers;
* :class:`Result`: the finished run's summary, metrics, models, masks and clusters;
* the evaluation protocol every HAR method applies to your windows, as functions:
  :func:`partition_by_subject` (one client per id, each client's classes split 80/20 in time
  order, :func:`time_ordered_split`) and :func:`standardize_all` (each client z-scored with
  its own training statistics), with the defaults the built-in datasets use.

Importing this module does not import TensorFlow; running a trainer does.
"""

from fedprune.api.builders import (
    BUILDERS,
    ascfl,
    build,
    caafp,
    cfl,
    cfl_fixed,
    clusterfl,
    efficientfl,
    fedavg,
    fedchar,
    fedcref,
    fedhire,
    fedkmeans,
    fedsnip,
    global_ft,
    ifca,
    kfed,
)
from fedprune.api.result import Result, open_result
from fedprune.api.trainer import Trainer, Workers
from fedprune.data.partition import (
    FederatedData,
    partition_by_subject,
    standardize_all,
    time_ordered_split,
)
from fedprune.data.tables import ClientTable, from_table
from fedprune.data.user import from_arrays, from_client_data, from_clients, read_npz, write_npz
from fedprune.data.user_images import ImageClients, from_images, images_from_client_data
from fedprune.data.windows import WindowedDataset
from fedprune.models.user import UserModel

__all__ = [
    "BUILDERS",
    "ClientTable",
    "FederatedData",
    "ImageClients",
    "Result",
    "Trainer",
    "UserModel",
    "WindowedDataset",
    "Workers",
    "ascfl",
    "build",
    "caafp",
    "cfl",
    "cfl_fixed",
    "clusterfl",
    "efficientfl",
    "fedavg",
    "fedchar",
    "fedcref",
    "fedhire",
    "fedkmeans",
    "fedsnip",
    "from_arrays",
    "from_client_data",
    "from_clients",
    "from_images",
    "from_table",
    "global_ft",
    "images_from_client_data",
    "ifca",
    "kfed",
    "open_result",
    "partition_by_subject",
    "read_npz",
    "standardize_all",
    "time_ordered_split",
    "write_npz",
]
