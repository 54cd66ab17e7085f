"""The export format names, in one place that imports no TensorFlow.

The command line lists and checks them before anything heavy is imported
(``edge-export --help`` answers at once); :mod:`edge_export.convert` says what each one does.
"""

from __future__ import annotations

from collections.abc import Sequence

from fedprune.errors import ConfigError

FORMATS = (
    "float32",
    "float16",
    "dynamic",
    "int8",
    "int8-float-head",
    "float32-sparse",
    "int8-sparse",
    "int8-qat",
    "int8-qat-sparse",
    "int16x8",
)
AUTOENCODER_FORMATS = ("float32", "float16", "dynamic", "int8")  # dense FedCRef models
MICRO_FORMATS = ("int8", "int8-float-head", "int8-qat", "int16x8")  # no float16, no sparse
DEFAULT_FORMATS = "float32,int8"
DEFAULT_AUTOENCODER_FORMATS = "float32,int8"


def check_formats(formats: Sequence[str], autoencoders: bool = False) -> None:
    """Raise a :class:`ConfigError` naming every format not offered (for the per-client
    classifiers, or for FedCRef's community ``autoencoders``)."""
    if autoencoders:
        bad = [f for f in formats if f not in AUTOENCODER_FORMATS]
        if bad or not formats:
            raise ConfigError(
                f"--formats: {bad or 'none given'} not offered for autoencoders (dense models: "
                f"sparse encodings do not apply); choose from {', '.join(AUTOENCODER_FORMATS)}"
            )
        return
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise ConfigError(
            f"--formats: unknown format(s) {unknown or 'none given'}; "
            f"choose from {', '.join(FORMATS)}"
        )


def parse_formats(spec: str | None, autoencoders: bool = False) -> list[str]:
    """The comma-separated ``spec`` (``None``: the default) as a checked list of formats."""
    if spec is None:
        spec = DEFAULT_AUTOENCODER_FORMATS if autoencoders else DEFAULT_FORMATS
    formats = [f.strip() for f in spec.split(",") if f.strip()]
    check_formats(formats, autoencoders)
    return formats
