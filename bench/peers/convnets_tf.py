"""TensorFlow 2's side of bench/convnets.cpp: LeNet-5 and ResNet-20 training steps in Keras under
tf.function, on random data, the same models and optimizers as weft's (bench/convnet_models.h).

  python convnets_tf.py [--quick]

Prints on stdout only:
  lenet_step_ms=<best ms per LeNet-5 step, batch 256, Adam(1e-3)>
  resnet20_step_ms=<best ms per ResNet-20 step, batch 64, SGD(0.1, momentum 0.9)>
Exit 3 when TensorFlow is not installed for this interpreter.
"""
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["CUDA_VISIBLE_DEVICES"] = ""
try:
    import tensorflow as tf
except ImportError as e:
    print(f"tensorflow missing: {e}", file=sys.stderr)
    sys.exit(3)

L = tf.keras.layers


def lenet5():
    return tf.keras.Sequential([
        tf.keras.Input(shape=(28, 28, 1)),
        L.Conv2D(6, 5, padding="same", activation="relu"), L.MaxPooling2D(2),
        L.Conv2D(16, 5, padding="valid", activation="relu"), L.MaxPooling2D(2),
        L.Flatten(), L.Dense(120, activation="relu"), L.Dense(84, activation="relu"), L.Dense(10)])


def resnet20():
    inputs = tf.keras.Input(shape=(32, 32, 3))
    y = L.ReLU()(L.BatchNormalization()(L.Conv2D(16, 3, padding="same", use_bias=False)(inputs)))
    for channels in (16, 32, 64):
        for b in range(3):
            stride = 2 if (b == 0 and channels != 16) else 1
            x = y
            y = L.ReLU()(L.BatchNormalization()(L.Conv2D(channels, 3, strides=stride, padding="same", use_bias=False)(x)))
            y = L.BatchNormalization()(L.Conv2D(channels, 3, padding="same", use_bias=False)(y))
            if stride != 1:
                x = L.BatchNormalization()(L.Conv2D(channels, 1, strides=stride, use_bias=False)(x))
            y = L.ReLU()(L.Add()([y, x]))
    y = L.Dense(10)(L.GlobalAveragePooling2D()(y))
    return tf.keras.Model(inputs, y)


def best_step_ms(model, optimizer, x, y, calls):
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    for _ in range(3):
        step(x, y).numpy()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(calls):
            step(x, y).numpy()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best * 1e3


def main():
    quick = "--quick" in sys.argv
    calls = 5 if quick else 20
    x = tf.random.normal([256, 28, 28, 1])
    y = tf.random.uniform([256], 0, 10, dtype=tf.int32)
    print(f"lenet_step_ms={best_step_ms(lenet5(), tf.keras.optimizers.Adam(1e-3), x, y, calls):.3f}", flush=True)
    x = tf.random.normal([64, 32, 32, 3])
    y = tf.random.uniform([64], 0, 10, dtype=tf.int32)
    opt = tf.keras.optimizers.SGD(0.1, momentum=0.9)
    print(f"resnet20_step_ms={best_step_ms(resnet20(), opt, x, y, 3 if quick else 10):.3f}", flush=True)


if __name__ == "__main__":
    main()
