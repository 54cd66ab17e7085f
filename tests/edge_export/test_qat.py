import numpy as np
import pytest
import tensorflow as tf

from edge_export.convert import to_tflite
from edge_export.qat import (
    _KeepZeros,
    float_copy,
    quantization_aware,
    quantization_aware_finetune,
    train_quantization_aware,
)
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
    model.set_weights(
        [w * (rng.random(w.shape) > 0.7) if w.ndim > 1 else w for w in model.get_weights()]
    )
    model.compile(tf.keras.optimizers.Adam(3e-3), "sparse_categorical_crossentropy")
    keep_zeros = _KeepZeros([w for w in model.trainable_weights if "kernel" in w.name])
    model.fit(x, y, epochs=20, verbose=0, callbacks=[keep_zeros])  # decisive, as after FL
    return model, x, y


def _kernels(model):
    return [w for w in model.get_weights() if w.ndim > 1]


def test_finetune_keeps_every_pruned_weight_zero_and_leaves_the_model_alone(pruned_model):
    model, x, y = pruned_model
    before = [w.copy() for w in model.get_weights()]
    tuned = quantization_aware_finetune(model, x, y, epochs=1, learning_rate=1e-3)
    assert [type(layer) for layer in tuned.layers] == [type(layer) for layer in model.layers]
    qat_kernels = _kernels(tuned)
    assert len(qat_kernels) == len(_kernels(model)) == 4
    for original, tuned in zip(_kernels(model), qat_kernels):
        assert np.all(tuned[original == 0] == 0)
        assert not np.array_equal(tuned, original)  # it did train
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))


def test_int8_file_matches_the_fake_quantized_model_it_was_trained_as(pruned_model):
    model, x, y = pruned_model
    qat = train_quantization_aware(model, x, y, epochs=1, learning_rate=1e-3)
    content = to_tflite(float_copy(qat, model), "int8-qat", x)
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
    # the fake-quant graph simulates what the int8 kernels compute, up to the output's 1/256
    # step and the range updates of the fake-quant nodes during training
    assert np.abs(np.array(probs) - keras).max() < 0.05
    top2 = np.sort(keras, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 0.1  # the toy model has many near-ties
    assert clear.sum() >= 8
    assert np.all(np.array(probs).argmax(1)[clear] == keras.argmax(1)[clear])


def test_float_copy_carries_the_trained_weights(pruned_model):
    model, x, y = pruned_model
    qat = train_quantization_aware(model, x, y, epochs=1, learning_rate=1e-3)
    copy = float_copy(qat, model)
    trained = {v.name: v.numpy() for v in qat.trainable_weights}
    for layer in copy.layers:
        for v in layer.weights:
            assert np.array_equal(v.numpy(), trained[f"{layer.name}/{v.name.split('/')[-1]}"])


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
