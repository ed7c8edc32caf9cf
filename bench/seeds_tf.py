"""TensorFlow 2's side of bench/seeds.cpp: the five seed programs (../shared/SEEDS.md) as written,
eager and under tf.function, timed the same way as weft's side (best of several rounds).

Run by bench_seeds with the interpreter of scripts/bench's private environment; prints one JSON
object on its last line: {"program": {"eager": seconds, "traced": seconds}, ...}.
Arguments: --quick for fewer calls.
"""
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

QUICK = "--quick" in sys.argv


def best_seconds(fn, calls, rounds):
    fn()  # the first call traces; it is not timed, as on weft's side
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


def eager_and_traced(fn, args, calls, rounds):
    traced = tf.function(fn)
    return {
        "eager": best_seconds(lambda: fn(*args), calls, rounds),
        "traced": best_seconds(lambda: traced(*args), calls, rounds),
    }


def dense_stack(widths, last_activation=None):
    layers = [tf.keras.layers.Dense(w, activation="relu") for w in widths[:-1]]
    layers.append(tf.keras.layers.Dense(widths[-1], activation=last_activation))
    return tf.keras.Sequential(layers)


def main():
    rng = np.random.default_rng(0)
    results = {}

    # Seed 004's exercise: relu(a + b) on 4 floats.
    a = tf.constant([1.0, -2.0, 3.0, -4.0])
    b = tf.constant([0.5, 0.5, -5.0, 5.0])
    results["add_then_relu"] = eager_and_traced(lambda p, q: tf.nn.relu(p + q), (a, b), 2000 if QUICK else 10000, 3)

    # Seed 000: four dense layers 784-128-128-128-10 over the 60 000 training images.
    x = tf.constant(rng.uniform(size=(60000, 784)).astype(np.float32))
    model = dense_stack([128, 128, 128, 10])
    results["seed000_forward"] = eager_and_traced(lambda t: model(t), (x,), 2 if QUICK else 5, 3)

    # Seed 004: Keras models called on a [60, 28, 28] input; Dense acts on the last axis.
    x = tf.constant(rng.uniform(size=(60, 28, 28)).astype(np.float32))
    # As the seed writes them: relu, relu, softmax.
    shallow = dense_stack([10, 20, 30], "softmax")
    results["seed004_shallow"] = eager_and_traced(lambda t: shallow(t), (x,), 100 if QUICK else 500, 3)
    deep = dense_stack([1000, 2000, 3000], "softmax")
    results["seed004_deep"] = eager_and_traced(lambda t: deep(t), (x,), 2 if QUICK else 5, 3)

    # The MLP training step, batch 256, SGD, with the tape inside the step.
    x = tf.constant(rng.normal(size=(256, 784)).astype(np.float32))
    y = tf.constant(rng.integers(0, 10, size=(256,)).astype(np.int32))
    mlp = dense_stack([128, 128, 128, 10])
    mlp.build((None, 784))
    opt = tf.keras.optimizers.SGD(0.01)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, mlp(xb, training=True))
        grads = tape.gradient(loss, mlp.trainable_variables)
        opt.apply_gradients(zip(grads, mlp.trainable_variables))
        return loss

    step_calls = 20 if QUICK else 100
    traced_step = tf.function(train_step)
    results["mlp_train_step"] = {
        "eager": best_seconds(lambda: float(train_step(x, y)), step_calls, 3),
        "traced": best_seconds(lambda: float(traced_step(x, y)), step_calls, 3),
    }

    results["_version"] = tf.__version__
    print(json.dumps(results))


if __name__ == "__main__":
    main()
