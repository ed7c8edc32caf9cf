"""TensorFlow 2's side of bench/data_parallel.cpp: MultiWorkerMirroredStrategy on this machine.

  python tf_multiworker.py --workers N --steps S --batch-per-replica 256 [--allreduce-mib 1,4,64]

Starts N worker processes (CPU only, each with its own TF_CONFIG on free localhost ports), each
building the MLP 784-128-128-128-10 (relu) under MultiWorkerMirroredStrategy and training it on
synthetic data with SGD(0.01), global batch N * batch-per-replica, the step a `strategy.run` inside
`tf.function`. Worker 0 prints, and the launcher relays, only these lines on stdout:

  step_ms=<median ms per training step>
  images_per_s=<global batch / median step time>
  allreduce_<k>MiB_ms=<median ms of a replica-context all_reduce SUM of k MiB of float32>

Logs go to stderr. Exit codes as in local_cluster.py (3: TensorFlow missing for this interpreter).
"""
import json
import sys
import time

import local_cluster as lc

NAME = "tf_multiworker"


def tf_config(index, ports):
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    return json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})


def env_for_worker(index, ports):
    return {
        "TF_CONFIG": tf_config(index, ports),
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "CUDA_VISIBLE_DEVICES": "",  # CPU only, as weft's side of the comparison
    }


def local_value(strategy, value):
    """This worker's value of a strategy.run result (a plain tensor or a PerReplica of one)."""
    return strategy.experimental_local_results(value)[0]


def train_step_timings(tf, strategy, args):
    global_batch = args.batch_per_replica * args.workers
    with strategy.scope():
        model = tf.keras.Sequential([
            tf.keras.Input(shape=(784,)),
            tf.keras.layers.Dense(128, activation="relu"),
            tf.keras.layers.Dense(128, activation="relu"),
            tf.keras.layers.Dense(128, activation="relu"),
            tf.keras.layers.Dense(10),
        ])
        optimizer = tf.keras.optimizers.SGD(learning_rate=0.01)
    # Per-example losses averaged over the global batch, so that the SUM of the replicas'
    # gradients (what the optimizer all-reduces) is the gradient of the global mean loss.
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=tf.keras.losses.Reduction.NONE)

    # Each worker its own synthetic batch, as each replica of a real input pipeline would have.
    tf.random.set_seed(1 + args.worker_index)
    x = tf.random.uniform((args.batch_per_replica, 784))
    y = tf.random.uniform((args.batch_per_replica,), maxval=10, dtype=tf.int32)

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(loss_fn(y, model(x, training=True)), global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tf.function
    def train_step(x, y):
        return strategy.run(replica_step, args=(x, y))

    def one_step():
        # Reading the loss waits for the step, whose all-reduce waits for every worker.
        return float(local_value(strategy, train_step(x, y)).numpy())

    for _ in range(args.warmup):
        one_step()
    times_ms = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        one_step()
        times_ms.append((time.perf_counter() - t0) * 1e3)
    step_ms = lc.median(times_ms)
    weights_sum = float(sum(tf.reduce_sum(v).numpy() for v in model.trainable_variables))
    # Identical on every worker when the gradients really were all-reduced; stderr, for checking.
    print(f"{NAME}: worker {args.worker_index} weights checksum {weights_sum:.9g}", file=sys.stderr)
    return {"step_ms": step_ms, "images_per_s": global_batch / (step_ms / 1e3)}


def allreduce_timings(tf, strategy, args):
    @tf.function
    def all_reduce(t):
        def replica_fn(t):
            # tf.identity puts the tensor on this replica's device (an input has none, which the
            # collective refuses); on the CPU it forwards the buffer, it copies nothing.
            reduced = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, tf.identity(t))
            return reduced[:1]  # fetching one element still waits for the whole reduction
        return strategy.run(replica_fn, args=(t,))

    def run(t):
        return local_value(strategy, all_reduce(t)).numpy()

    barrier = tf.zeros([1])
    results = {}
    for mib in args.allreduce_mib:
        t = tf.zeros([lc.mib_elements(mib)])
        for _ in range(3):
            run(t)
        times_ms = []
        for _ in range(args.allreduce_reps):
            run(barrier)  # start together, so that no worker's time includes waiting for a late one
            t0 = time.perf_counter()
            run(t)
            times_ms.append((time.perf_counter() - t0) * 1e3)
        results[f"allreduce_{mib}MiB_ms"] = lc.median(times_ms)
    return results


def worker(args):
    out = lc.become_worker(args.timeout)
    try:
        import tensorflow as tf
    except ImportError as e:
        lc.log(NAME, f"TensorFlow is not installed for {sys.executable}: {e}")
        return lc.EXIT_UNAVAILABLE
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING,
        timeout_seconds=float(args.timeout))
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    results = train_step_timings(tf, strategy, args)
    results.update(allreduce_timings(tf, strategy, args))
    if args.worker_index == 0:
        lc.emit(out, results)
    return 0


def main():
    args = lc.parse_args(__doc__.splitlines()[0])
    if args.worker_index is None:
        return lc.launch(NAME, args, env_for_worker)
    return worker(args)


if __name__ == "__main__":
    sys.exit(main())
