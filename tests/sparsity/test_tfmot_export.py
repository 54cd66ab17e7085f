import numpy as np
import tensorflow_model_optimization as tfmot

from fedprune.models.cnn1d import build_har_cnn
from fedprune.sparsity import masks as M
from fedprune.sparsity.layers import prunable_mask_flags
from fedprune.sparsity.tfmot_export import kernel_masks_of, to_pruned_keras


def test_roundtrip_masks_and_strip_pruning():
    model = build_har_cnn((128, 9), 6, seed=1)
    weights = model.get_weights()
    flags = prunable_mask_flags(model)
    rng = np.random.default_rng(0)
    kernels = [w for w, f in zip(weights, flags) if f]
    kmasks = M.prune_to(
        [np.ones_like(k) for k in kernels], [rng.random(k.shape) for k in kernels], 0.7
    )
    wrapped = to_pruned_keras(build_har_cnn((128, 9), 6), weights, kmasks)
    assert all(np.array_equal(a, b) for a, b in zip(kernel_masks_of(wrapped), kmasks))
    stripped = tfmot.sparsity.keras.strip_pruning(wrapped)
    stripped_kernels = [w for w, f in zip(stripped.get_weights(), flags) if f]
    assert M.sparsity([(k != 0).astype(np.float32) for k in stripped_kernels]) >= 0.7 - 1e-3
    for k, m, original in zip(stripped_kernels, kmasks, kernels):
        np.testing.assert_array_equal(k, original * m)
    x = rng.normal(size=(4, 128, 9)).astype(np.float32)
    np.testing.assert_allclose(
        wrapped.predict(x, verbose=0), stripped.predict(x, verbose=0), atol=1e-6
    )
