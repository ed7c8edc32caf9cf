"""What bench/peers/nanogpt_torch.py and nanogpt_tf.py share: nanoGPT's CPU configuration and
training hyper-parameters, the command line, the timing loop and the `key=value` results.

  step_ms=<median ms of a timed step>
  tokens_per_s=<BATCH_SIZE * BLOCK_SIZE tokens / median step seconds>
  loss=<the loss of the last step>
"""
import argparse
import os
import statistics
import sys
import time

EXIT_UNAVAILABLE = 3  # the framework is not installed for this interpreter

# nanoGPT's README configuration for a CPU (character level).
VOCAB_SIZE = 65
BLOCK_SIZE = 64
BATCH_SIZE = 12
N_LAYER = 4
N_HEAD = 4
N_EMBD = 128
DROPOUT = 0.0
BIAS = True

# train.py's optimisation, as config/train_shakespeare_char.py sets it.
LEARNING_RATE = 1e-3
MIN_LR = 1e-4
WARMUP_ITERS = 100
LR_DECAY_ITERS = 2000
WEIGHT_DECAY = 1e-1
BETAS = (0.9, 0.99)
GRAD_CLIP = 1.0


def logger(name):
    """A function that writes `name: message` lines to stderr."""
    def log(message):
        print(f"{name}: {message}", file=sys.stderr, flush=True)
    return log


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def parse_args(description, threads_help):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--steps", type=positive_int, default=30, help="timed training steps")
    parser.add_argument("--warmup", type=int, default=5, help="untimed training steps first")
    parser.add_argument("--threads", type=positive_int, default=os.cpu_count() or 1,
                        help=f"{threads_help} (default: os.cpu_count())")
    return parser.parse_args()


def time_steps(step, warmup, steps):
    """Runs `step` (which returns the loss as a float, once the step is done) `warmup` times, then
    `steps` timed times; returns the timed steps' milliseconds, the first loss and the last."""
    losses = [step() for _ in range(warmup)]
    times_ms = []
    for _ in range(steps):
        t0 = time.perf_counter()
        losses.append(step())
        times_ms.append((time.perf_counter() - t0) * 1e3)
    return times_ms, losses[0], losses[-1]


def print_results(log, times_ms, first_loss, last_loss, where):
    step_ms = statistics.median(times_ms)
    log(f"loss {first_loss:.4f} at the first step, {last_loss:.4f} {where}; "
        f"step ms min {min(times_ms):.2f} median {step_ms:.2f} max {max(times_ms):.2f}")
    results = {
        "step_ms": step_ms,
        "tokens_per_s": BATCH_SIZE * BLOCK_SIZE / (step_ms / 1e3),
        "loss": last_loss,
    }
    for key, value in results.items():
        print(f"{key}={value:.6g}")
    sys.stdout.flush()
