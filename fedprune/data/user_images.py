"""Your own labelled images per client, for the clustered-FL methods (AS-CFL, CFL, CFL with a
fixed K, IFCA): from arrays, a TFF ``ClientData``, or an ``.npz`` file.

AS-CFL's server holds a small labelled **proxy set** (its positive-incentive test scores
candidate clusters on it), so your data comes with one: images the server may see, drawn from
the task's distribution. Optionally each client's **group** (e.g. the rotation of its camera,
its site) is known; it is ground truth for the ARI of the clusters found, never seen by a
method. Each client's images are split per class in the given order, the first 80 % to
training (:func:`fedprune.data.partition.time_ordered_split`), as for the HAR windows.
Clients keep their ids (in ascending order) in everything a run writes: ``clusters.json``,
:meth:`fedprune.api.Result.assignments`, the export folders ``client<id>/``.

The ``.npz`` file (``fedprune train ascfl --dataset path/to/images.npz``) holds ``x``
(N, H, W, C) floats, ``y`` (N,) classes, ``client_id`` (N,), ``proxy_x`` and ``proxy_y``, and
optionally ``group`` (one per client, in ascending client-id order) and ``class_names``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fedprune.data.partition import ClientData, FederatedData, time_ordered_split
from fedprune.data.rotated_partition import RotatedFederatedData
from fedprune.data.user import (
    _finite,
    _integers,
    _numbers,
    _samples,
    file_names,
    implied_classes,
    load_archive,
    text_names,
)
from fedprune.errors import DataError

MIN_IMAGES = 2
REQUIRED = ("x", "y", "client_id", "proxy_x", "proxy_y")
OPTIONAL = ("group", "class_names")


@dataclasses.dataclass(frozen=True)
class ImageClients:
    """Labelled images ``x`` (N, H, W, C) float32, ``y`` int64, the client of each
    (``client``), the server's proxy set, the clients' ground-truth groups (or ``None``) and
    the class names."""

    name: str
    x: np.ndarray
    y: np.ndarray
    client: np.ndarray
    proxy_x: np.ndarray
    proxy_y: np.ndarray
    class_names: tuple[str, ...]
    group: np.ndarray | None = None

    @property
    def clients(self) -> np.ndarray:
        return np.unique(self.client)


def from_images(
    x: Any,  # noqa: ANN401 (array-like)
    y: Any,  # noqa: ANN401
    client_ids: Any,  # noqa: ANN401
    *,
    proxy: tuple[Any, Any],
    groups: Sequence[int] | None = None,
    class_names: Sequence[str] | None = None,
    name: str = "user",
    source: str = "",
) -> ImageClients:
    """Clients' labelled images for the clustered-FL methods.

    Parameters
    ----------
    x : array-like
        (N, H, W, C) images (add a channel axis to grey ones).
    y : array-like
        (N,) integer classes.
    client_ids : array-like
        (N,) the client (an integer) of each image.
    proxy : (array-like, array-like)
        The server's labelled proxy set, images shaped like ``x`` and their classes.
    groups : sequence of int, optional
        Each client's ground-truth group, in ascending client-id order (for the ARI only).
    class_names : sequence of str, optional
        Default: ``"0"``, ``"1"``, ...
    name, source : str
        The data's name in reports; where the arrays came from, for messages.

    Raises
    ------
    DataError
        One line naming the problem and what to fix.
    """
    where = f"{source}: " if source else ""
    x = _samples(
        x, ("images", "height", "width", "channels"), where,
        "add a channel axis to grey images (x[..., None])",
    )  # fmt: skip
    y = _integers(y, "y", len(x), where, "image", negative=True)  # classes checked below
    client = _integers(client_ids, "client_id", len(x), where, "image")
    proxy_x = _numbers(proxy[0], "proxy_x", where)
    if proxy_x.shape[1:] != x.shape[1:] or len(proxy_x) == 0 or proxy_x.ndim != x.ndim:
        raise DataError(
            f"{where}proxy_x must hold images shaped like x's {x.shape[1:]}, got {proxy_x.shape}"
        )
    _finite(proxy_x.astype(np.float32), "proxy_x", where)
    proxy_y = _integers(proxy[1], "proxy_y", len(proxy_x), where, "proxy image", negative=True)
    if class_names is None:
        labels = np.concatenate([y, proxy_y])
        names = tuple(map(str, range(implied_classes(labels, len(labels), where, "y/proxy_y"))))
    else:
        names = text_names(class_names, "class_names", where)
    for key, labels in (("y", y), ("proxy_y", proxy_y)):
        bad = np.flatnonzero((labels < 0) | (labels >= len(names)))
        if len(bad):
            raise DataError(
                f"{where}{key}[{bad[0]}] = {labels[bad[0]]} is not a class in [0, {len(names)})"
            )
    ids, counts = np.unique(client, return_counts=True)
    if len(ids) < 2:
        raise DataError(f"{where}client_id names {len(ids)} client; clustering needs 2 or more")
    if (counts < MIN_IMAGES).any():
        small = ids[counts < MIN_IMAGES][0]
        raise DataError(
            f"{where}client {small} has fewer than {MIN_IMAGES} images; the split needs one "
            "to train and one to test"
        )
    group = None
    if groups is not None:
        group = _integers(groups, "group", len(ids), where, "client", negative=True)
    return ImageClients(
        name, x.astype(np.float32), y, client, proxy_x.astype(np.float32), proxy_y, names, group
    )


def images_from_client_data(
    client_data: Any,  # noqa: ANN401 (tff.simulation.datasets.ClientData)
    *,
    proxy: tuple[Any, Any],
    x_key: str = "x",
    y_key: str = "y",
    groups: Sequence[int] | None = None,
    class_names: Sequence[str] | None = None,
    name: str = "user",
) -> ImageClients:
    """:func:`from_images` of a TFF ``ClientData`` whose elements hold an image under
    ``x_key`` (H, W) or (H, W, C) and its label under ``y_key``; clients in
    ``client_data.client_ids`` order, numbered 0, 1, ...

    ``x_key`` and ``y_key`` are the keys of each element (a mapping) that hold the image and
    its integer label: ``"x"`` and ``"y"`` by default; TFF's EMNIST has ``"pixels"`` and
    ``"label"``. Elements without them are one :class:`DataError` listing the keys they
    have. ``proxy``, ``groups``, ``class_names`` and ``name`` are :func:`from_images`'."""
    xs, ys, owners = [], [], []
    for number, client in enumerate(client_data.client_ids):
        for element in client_data.create_tf_dataset_for_client(client).as_numpy_iterator():
            if x_key not in element or y_key not in element:
                raise DataError(
                    f"client {client}'s elements have keys {sorted(element)}; pass x_key and "
                    "y_key naming the image and the label"
                )
            xs.append(element[x_key])
            ys.append(element[y_key])
            owners.append(number)
    if not xs:
        raise DataError("the ClientData holds no images")
    x = np.stack(xs)
    if x.ndim == 3:
        x = x[..., None]
    return from_images(
        x, np.array(ys), np.array(owners), proxy=proxy, groups=groups, class_names=class_names,
        name=name,
    )  # fmt: skip


def read_images_npz(path: str | os.PathLike) -> ImageClients:
    """The images in an ``.npz`` file with the keys of the module docstring."""
    path = Path(path)
    arrays = load_archive(path, REQUIRED, OPTIONAL)
    return from_images(
        arrays["x"], arrays["y"], arrays["client_id"],
        proxy=(arrays["proxy_x"], arrays["proxy_y"]), groups=arrays.get("group"),
        class_names=file_names(arrays, "class_names", path), name=path.name, source=str(path),
    )  # fmt: skip


def write_images_npz(images: ImageClients, path: str | os.PathLike) -> Path:
    """Write ``images`` as an ``.npz`` file :func:`read_images_npz` reads back the same
    (atomically: :func:`fedprune.runs.files.write_npz`)."""
    from fedprune.runs.files import write_npz

    path = Path(path)
    arrays = {
        "x": images.x, "y": images.y, "client_id": images.client, "proxy_x": images.proxy_x,
        "proxy_y": images.proxy_y, "class_names": np.array(images.class_names),
    }  # fmt: skip
    if images.group is not None:
        arrays["group"] = images.group
    write_npz(path, arrays)
    return path


def to_federation(images: ImageClients) -> RotatedFederatedData:
    """``images`` as the clustered-FL methods' federation: the clients by their own ids, in
    ascending order, each split per class in the given order, 80 % to training (the methods
    number them 0, 1, ... while they train: :func:`fedprune.algorithms.ascfl.experiment.
    numbered`); the proxy set as given; each
    client's group in the place of its rotation (``angles`` lists the distinct groups), or no
    ground truth (``rotation_of_client`` ``None``: the runs report no ARI)."""
    clients, train_index, test_index = [], [], []
    for cid in images.clients:
        rows = np.flatnonzero(images.client == cid)
        tr, te = time_ordered_split(images.y[rows], 0.2)
        clients.append(
            ClientData(
                int(cid),
                images.x[rows[tr]],
                images.y[rows[tr]],
                images.x[rows[te]],
                images.y[rows[te]],
            )  # fmt: skip
        )
        train_index.append(rows[tr])
        test_index.append(rows[te])
    federated = FederatedData(
        images.name, tuple(clients), images.class_names, tuple(images.x.shape[1:])
    )
    groups = None if images.group is None else tuple(int(g) for g in images.group)
    return RotatedFederatedData(
        federated=federated,
        angles=tuple(sorted(set(groups))) if groups else (0,),
        rotation_of_client=groups,
        size_fraction=(1.0,) * len(clients),
        proxy_x=images.proxy_x,
        proxy_y=images.proxy_y,
        proxy_angle=np.zeros(len(images.proxy_y), np.int64),
        train_index=tuple(train_index),
        test_index=tuple(test_index),
        proxy_index=np.arange(len(images.proxy_y)),
    )
