"""Model specs: paper parameter counts, seeded weights, the table entry. (That the engine
imports no concrete model is tests/test_imports.py's rule.)"""

import numpy as np
import pytest

from fedprune.errors import ConfigError
from fedprune.models.spec import AutoencoderSpec, ModelSpec


@pytest.mark.parametrize("shape, params", [((128, 9), 89_254), ((200, 3), 124_198)])
def test_paper_parameter_counts(shape, params):
    assert ModelSpec(shape, 6, seed=0).keras().count_params() == params


def test_autoencoder_has_the_papers_parameter_count():
    assert AutoencoderSpec(784, seed=0).keras().count_params() == 174_840


def test_seed_fixes_initial_weights():
    a = ModelSpec((128, 9), 6, seed=3).initial_weights().trainable
    b = ModelSpec((128, 9), 6, seed=3).keras().get_weights()
    c = ModelSpec((128, 9), 6, seed=4).initial_weights().trainable
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    assert not np.array_equal(a[0], c[0])


def test_masked_model_constrains_every_kernel_only_when_asked():
    masked = ModelSpec((128, 9), 6, seed=0).keras(masked=True)
    plain = ModelSpec((128, 9), 6, seed=0).keras()
    kernels = [layer for layer in masked.layers if hasattr(layer, "kernel")]
    assert [layer.name for layer in kernels] == ["conv1", "conv2", "dense", "probs"]
    assert all(layer.kernel_constraint is not None for layer in kernels)
    assert all(getattr(layer, "kernel_constraint", None) is None for layer in plain.layers)


def test_spec_refuses_a_model_of_the_other_task():
    with pytest.raises(ConfigError, match="'autoencoder' is a reconstruction model"):
        ModelSpec((128, 9), 6, seed=0, model="autoencoder")
    with pytest.raises(ConfigError, match="unknown model 'cnn'"):
        ModelSpec((128, 9), 6, seed=0, model="cnn")
