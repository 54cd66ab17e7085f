"""One public builder per method: ``fedprune.api.<method>(data, ...)`` returns a
:class:`~fedprune.api.trainer.Trainer` whose :meth:`~fedprune.api.trainer.Trainer.run` trains
into a run directory.

Every builder takes the method's configuration the way ``fedprune train <method>`` does: as
keyword options named like the command's options (``phases=(0, 0, 50)`` for ``--phases
0,0,50``, ``learning_rate`` for ``--lr``), or as a whole configuration object (``config=``,
the class the registry names, :mod:`fedprune.configs`), or both (the options then replace
fields of ``config``). Every value is checked here, before anything runs, by the code the
command runs (:func:`fedprune.configs.fields.built_config`): a value out of its range, or an
option the method does not use with the options given (``clusters=1,
cluster_signal_noise=1``, ``fp.cfl(theta=0.8)``), is a :class:`~fedprune.errors.ConfigError`
with the line the command prints, naming the keywords (``clients_per_round=2``) where the
command names its options (``--clients-per-round 2``).

``data`` is a built-in dataset's name, the path of your own ``.npz`` file, or your data in
memory: for the HAR methods your windows as a :class:`~fedprune.data.windows.WindowedDataset`
(:func:`fedprune.data.user.from_arrays`, :func:`~fedprune.data.user.from_clients`,
:func:`~fedprune.data.user.from_client_data`), for the one-shot clustering methods your
table as a :class:`~fedprune.data.tables.ClientTable` (:func:`fedprune.data.tables.from_table`).
Which one a method takes is its registry entry's ``data``. ``model_fn`` (HAR methods) is your
own Keras model function (:mod:`fedprune.models.user`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

from fedprune.api.trainer import Trainer
from fedprune.configs.fields import Config, built_config, python_error
from fedprune.data.tables import ClientTable
from fedprune.data.user_images import ImageClients
from fedprune.data.windows import WindowedDataset
from fedprune.errors import ConfigError
from fedprune.methods import METHODS
from fedprune.models.user import UserModel
from fedprune.runs.names import USER_DATASET

DataArg = str | os.PathLike | WindowedDataset | ImageClients | ClientTable
YOURS = {"windows": WindowedDataset, "images": ImageClients, "table": ClientTable}
ModelFn = Callable[..., Any] | UserModel


def build(
    method: str,
    data: DataArg | None = None,
    *,
    model_fn: ModelFn | None = None,
    config: Config | None = None,
    **options: Any,  # noqa: ANN401
) -> Trainer:
    """The :class:`Trainer` of registered method ``method`` (a ``fedprune train`` sub-command
    name); the per-method builders below call this.

    Parameters
    ----------
    method : str
        The method's name in :data:`fedprune.methods.METHODS`.
    data : str, path, WindowedDataset, ImageClients or ClientTable, optional
        The data (module docstring); default: ``config.dataset`` or the configuration's
        default dataset.
    model_fn : callable or UserModel, optional
        Your model, for the methods whose registry entry ``takes_model``:
        ``model_fn(input_shape, num_classes)`` (FedCRef: ``model_fn(input_dim)``) returning
        an uncompiled ``tf.keras.Model``.
    config : Config, optional
        The method's configuration; ``options`` replace its fields.
    **options
        Configuration fields by name.

    Returns
    -------
    Trainer

    Raises
    ------
    ConfigError
        An unknown method or option, a value outside its range, a configuration of another
        method, or ``model_fn`` / your data of a kind the method does not take.
    """
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; the known methods are {', '.join(METHODS)}")
    entry = METHODS[method]
    fields = {f.name for f in dataclasses.fields(entry.config) if f.init}
    unknown = sorted(set(options) - fields)
    if unknown:
        raise ConfigError(
            f"{method}: unknown option(s) {', '.join(unknown)}; the options are "
            f"{', '.join(sorted(fields - {'method', 'dataset_sha256', 'model'}))}"
        )
    if config is not None and not isinstance(config, entry.config):
        raise ConfigError(
            f"{method} takes a {entry.config.__name__}, got a {type(config).__name__}"
        )
    user = model_fn if isinstance(model_fn, UserModel) or model_fn is None else UserModel(model_fn)
    mine = data if isinstance(data, tuple(YOURS.values())) else None
    if user is not None and not entry.takes_model:
        raise ConfigError(
            f"{method} does not take your own model; "
            f"{', '.join(n for n, m in METHODS.items() if m.takes_model)} do"
        )
    if mine is not None and not isinstance(mine, YOURS.get(entry.data, ())):
        takes = [n for n, m in METHODS.items() if isinstance(mine, YOURS.get(m.data, ()))]
        raise ConfigError(f"{method} does not take a {type(mine).__name__}; {', '.join(takes)} do")
    settled: dict[str, Any] = {}  # set from your data and model, never "not used"
    if mine is not None:
        settled["dataset"] = USER_DATASET  # placed in the run directory by Trainer.run
        if isinstance(mine, ImageClients):  # the clients are yours: their number too
            settled["num_clients"] = len(mine.clients)
    elif data is not None:
        settled["dataset"] = os.fspath(data)
    if "dataset" in settled and "dataset" in options:
        raise ConfigError(f"{method}: give the data once, as data or as dataset=, not both")
    if user is not None:
        settled["model"] = user.recorded
    if config is None and "dataset" not in {**settled, **options}:
        if _required(entry.config, "dataset"):
            raise ConfigError(f"{method}: give the data (a dataset name or your own data)")
    try:
        config = built_config(
            entry.config, options, f"`fedprune train {method}`", base=config, settled=settled
        )
    except ConfigError as err:
        raise python_error(err, entry.config) from None
    return Trainer(entry, config, mine, user, spelling="python")


def _required(cls: type, name: str) -> bool:
    field = next(f for f in dataclasses.fields(cls) if f.name == name)
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def _builder(method: str, what: str) -> Callable[..., Trainer]:
    """The public builder of ``method`` (a thin, documented wrapper of :func:`build`)."""
    config = METHODS[method].config
    takes_model = METHODS[method].takes_model
    kind = YOURS[METHODS[method].data].__name__ if METHODS[method].data else ""

    def builder(
        data: DataArg | None = None,
        *,
        model_fn: ModelFn | None = None,
        config: Config | None = None,
        **options: Any,  # noqa: ANN401
    ) -> Trainer:
        return build(method, data, model_fn=model_fn, config=config, **options)

    signature = "input_dim" if METHODS[method].data == "table" else "input_shape, num_classes"
    model_line = (
        "model_fn : callable or UserModel, optional\n"
        f"        Your model, ``model_fn({signature})`` -> uncompiled\n"
        "        ``tf.keras.Model`` (:mod:`fedprune.models.user`); default: the built-in one.\n"
        if takes_model
        else "model_fn : None\n        Not taken by this method (its built-in model is used).\n"
    )
    builder.__name__ = builder.__qualname__ = method.replace("-", "_")
    builder.method = method  # the registry name
    builder.__doc__ = f"""{what}: ``fedprune train {method}`` as a :class:`Trainer`.

    Parameters
    ----------
    data : str, path{" or " + kind if kind else ""}, optional
        The data: see :mod:`fedprune.api.builders`.
    {model_line}    config : {config.__name__}, optional
        The whole configuration (:mod:`fedprune.configs`); ``options`` replace its fields.
    **options
        {config.__name__} fields by name (``fedprune train {method} --help`` lists them with
        their defaults and ranges).

    Returns
    -------
    Trainer
        ``.run(out)`` trains into the run directory ``out`` and returns a :class:`Result`.
    """
    return builder


caafp = _builder("caafp", "CA-AFP: clustering, prune-and-heal, sparse fine-tuning")
global_ft = _builder("global_ft", "Global-FT: CA-AFP with one cluster")
fedchar = _builder("fedchar", "FedCHAR: dense clustered personalized HAR")
efficientfl = _builder("efficientfl", "EfficientFL: one early magnitude mask")
fedsnip = _builder("fedsnip", "FedSNIP: one SNIP mask at the initial weights")
clusterfl = _builder("clusterfl", "ClusterFL: clustered multi-task learning by ADMM")
fedavg = _builder("fedavg", "FedAvg: one global model")
fedcref = _builder("fedcref", "FedCRef: unsupervised federated clustering")
ascfl = _builder("ascfl", "AS-CFL: adaptive clustered FL without a preset K")
cfl = _builder("cfl", "CFL: clustered FL by recursive bipartition")
cfl_fixed = _builder("cfl-fixed", "CFL with a fixed number of clusters")
ifca = _builder("ifca", "IFCA: K models, each client picks the lowest loss")
fedhire = _builder("fedhire", "Fed-HIRE: one-shot hierarchical federated clustering")
kfed = _builder("kfed", "k-FED: one-shot federated k-means")
fedkmeans = _builder("fedkmeans", "federated k-means (TFF's build_fed_kmeans)")

BUILDERS: dict[str, Callable[..., Trainer]] = {
    builder.method: builder
    for builder in (
        caafp, global_ft, fedchar, efficientfl, fedsnip, clusterfl, fedavg, fedcref, ascfl,
        cfl, cfl_fixed, ifca, fedhire, kfed, fedkmeans,
    )
}  # fmt: skip
"""The builder of every built-in method, by its registry name (a test checks that none is
missing); a method registered later is built with :func:`build`."""
