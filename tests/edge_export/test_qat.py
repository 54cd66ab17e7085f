import numpy as np
import pytest
import tensorflow as tf

from edge_export.convert import to_tflite
from edge_export.qat import quantization_aware, quantization_aware_finetune
from fedprune.errors import ConfigError
from fedprune.models.cnn1d import build_har_cnn

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pruned_model():
    """A small trained HAR CNN whose kernels are 70 % zeros, and its data."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(96, 128, 9)).astype(np.float32)
    y = (x[:, :, :3].mean(axis=(1, 2)) > 0).astype(np.int64) + 2 * (x[:, 0, 4] > 0)
    model = build_har_cnn((128, 9), 6, seed=0)
    model.compile("adam", "sparse_categorical_crossentropy")
    model.fit(x, y, epochs=3, verbose=0)
    model.set_weights(
        [w * (rng.random(w.shape) > 0.7) if w.ndim > 1 else w for w in model.get_weights()]
    )
    return model, x, y


def _kernels(model):
    return [w for w in model.get_weights() if w.ndim > 1]


def test_finetune_keeps_every_pruned_weight_zero_and_leaves_the_model_alone(pruned_model):
    model, x, y = pruned_model
    before = [w.copy() for w in model.get_weights()]
    qat = quantization_aware_finetune(model, x, y, epochs=1, learning_rate=1e-3)
    qat_kernels = [
        w.numpy() for layer in qat.layers for w in layer.trainable_weights if "kernel" in w.name
    ]
    assert len(qat_kernels) == len(_kernels(model)) == 4
    for original, tuned in zip(_kernels(model), qat_kernels):
        assert np.all(tuned[original == 0] == 0)
        assert not np.array_equal(tuned, original)  # it did train
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))


def test_int8_file_of_the_qat_model_matches_its_fake_quantized_keras_model(pruned_model):
    model, x, y = pruned_model
    qat = quantization_aware_finetune(model, x, y, epochs=1, learning_rate=1e-3)
    content = to_tflite(qat, "int8-qat", x)
    interpreter = tf.lite.Interpreter(model_content=content)
    interpreter.allocate_tensors()
    inp, out = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    (s_in, z_in), (s_out, z_out) = inp["quantization"], out["quantization"]
    probs = []
    for window in x[:32]:
        q = np.clip(np.round(window / s_in + z_in), -128, 127).astype(np.int8)
        interpreter.set_tensor(inp["index"], q[None])
        interpreter.invoke()
        probs.append((interpreter.get_tensor(out["index"])[0].astype(np.float32) - z_out) * s_out)
    keras = qat.predict(x[:32], verbose=0)
    # the fake-quant graph is what the int8 kernels compute, up to the output's 1/256 step and
    # the input quantization that the Keras graph does not simulate
    assert np.abs(np.array(probs) - keras).max() < 0.05
    assert np.mean(np.array(probs).argmax(1) == keras.argmax(1)) >= 0.95


def test_same_seed_same_qat_model(pruned_model):
    model, x, y = pruned_model
    a = quantization_aware_finetune(model, x, y, epochs=1, seed=3).get_weights()
    b = quantization_aware_finetune(model, x, y, epochs=1, seed=3).get_weights()
    assert all(np.array_equal(u, v) for u, v in zip(a, b))


def test_bad_parameters_and_unsupported_layers_are_clear_errors(pruned_model):
    model, x, y = pruned_model
    with pytest.raises(ConfigError, match="epochs >= 1"):
        quantization_aware_finetune(model, x, y, epochs=0)
    with pytest.raises(ConfigError, match="learning rate"):
        quantization_aware_finetune(model, x, y, learning_rate=0.0)
    inputs = tf.keras.Input((8, 4))
    gru = tf.keras.Model(inputs, tf.keras.layers.GRU(3)(inputs))
    with pytest.raises(ConfigError, match="quantization-aware training: .*gru"):
        quantization_aware(gru)
