"""The model table: importable without TensorFlow, names checked, kernel layers = the models'."""

import subprocess
import sys

import pytest

from fedprune.errors import ConfigError
from fedprune.models.table import MODELS, model_entry


def test_table_imports_without_tensorflow_quickly():
    code = (
        "import sys, time; t = time.perf_counter(); import fedprune.models.table; "
        "print(time.perf_counter() - t, 'tensorflow' in sys.modules, 'numpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seconds, tensorflow, numpy = out.stdout.split()
    assert (tensorflow, numpy) == ("False", "False")
    # measured 9 ms idle; importing TensorFlow takes ~20 s, so 2 s (200x idle) still tells
    # the two apart on a loaded machine
    assert float(seconds) < 2.0


def test_unknown_model_lists_the_known_ones():
    with pytest.raises(
        ConfigError, match="unknown model 'resnet'; the known models are " "autoencoder, har_cnn"
    ):
        model_entry("resnet")


@pytest.mark.parametrize(
    "name, args",
    [
        ("har_cnn", ((128, 9), 6)),
        ("har_cnn", ((200, 3), 6)),
        ("har_cnn_small", ((128, 9), 6)),
        ("har_cnn_small", ((200, 3), 6)),
        ("autoencoder", (784,)),
        ("image_cnn", ((28, 28, 1), 10)),
        ("image_cnn_small", ((28, 28, 1), 10)),
    ],
)
def test_kernel_layers_are_the_built_models_prunable_layers(name, args):
    from fedprune.sparsity.layers import prunable_mask_flags

    entry = MODELS[name]
    model = entry.build(*args, seed=0)
    owners = [layer.name for layer in model.layers for _ in layer.trainable_weights]
    flags = prunable_mask_flags(model)
    assert tuple(n for n, f in zip(owners, flags) if f) == entry.kernel_layers


@pytest.mark.parametrize("shape, params", [((128, 9), 4_870), ((200, 3), 4_630)])
def test_the_small_har_model_has_the_documented_size(shape, params):
    model = MODELS["har_cnn_small"].build(shape, 6, seed=0)
    assert model.count_params() == params
    # masked: one mask per prunable kernel, the shape of its kernel
    masked = MODELS["har_cnn_small"].build(shape, 6, seed=0, masked=True)
    for name in MODELS["har_cnn_small"].kernel_layers:
        layer = masked.get_layer(name)
        assert tuple(layer.kernel_constraint.mask.shape) == tuple(layer.kernel.shape)


def test_entries_resolve_their_builders():
    for name, entry in MODELS.items():
        assert entry.name == name
        assert callable(entry.build_function())
        assert entry.description and "\n" not in entry.description
