"""TensorFlow 2's side of the nanoGPT training step: nanoGPT's CPU configuration (character level:
vocab 65, n_layer 4, n_head 4, n_embd 128, block_size 64, batch 12, dropout 0.0, bias True) written
as a Keras 3 user writes it, trained by a custom loop whose step is a tf.function, on the CPU.

  python nanogpt_tf.py [--steps 30] [--warmup 5] [--threads N]

The model is a subclassed keras.Model: Embedding for tokens (65 x 128) and learned positions
(64 x 128); 4 pre-LayerNorm blocks (LayerNormalization(epsilon=1e-5)) of
MultiHeadAttention(num_heads=4, key_dim=32) with use_causal_mask=True (Keras's layer projects q, k
and v separately, where nanoGPT fuses them; the arithmetic is the same) and an MLP
Dense(512, gelu) -> Dense(128) (Keras's gelu is the exact one); a final LayerNormalization; an LM
head tied to the token embedding (logits = h @ embeddings^T); SparseCategoricalCrossentropy. A step
is GradientTape, loss, gradients, and optimizer.apply_gradients of keras.optimizers.AdamW (betas
(0.9, 0.99), weight decay 0.1 with biases and LayerNorm scales and offsets excluded, as nanoGPT
decays only parameters of rank >= 2; global_clipnorm 1.0 as nanoGPT's clip_grad_norm_) on a
CosineDecay schedule (100 linear warm-up steps to 1e-3, then cosine down to 1e-4 at step 2000, as
nanoGPT's get_lr). The inputs are random ids in [0, 65) of shape [12, 64] and their targets
likewise, made once. Prints on stdout only:

  step_ms=<median ms of a timed step>
  tokens_per_s=<12*64 tokens / median step seconds>
  loss=<the loss of the last step>

Logs go to stderr. --threads (default os.cpu_count()) sets TensorFlow's intra- and inter-op thread
pools before anything runs. Exit 3 when TensorFlow is not installed for this interpreter.
"""
import os
import sys

from nanogpt_common import (BATCH_SIZE, BETAS, BLOCK_SIZE, EXIT_UNAVAILABLE, GRAD_CLIP, LEARNING_RATE,
                            LR_DECAY_ITERS, MIN_LR, N_EMBD, N_HEAD, N_LAYER, VOCAB_SIZE, WARMUP_ITERS,
                            WEIGHT_DECAY, logger, parse_args, print_results, time_steps)

log = logger("nanogpt_tf")


def build_model(keras):
    L = keras.layers

    class Block(L.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.ln_1 = L.LayerNormalization(epsilon=1e-5)
            self.attn = L.MultiHeadAttention(num_heads=N_HEAD, key_dim=N_EMBD // N_HEAD)
            self.ln_2 = L.LayerNormalization(epsilon=1e-5)
            self.mlp_fc = L.Dense(4 * N_EMBD, activation="gelu")
            self.mlp_proj = L.Dense(N_EMBD)

        def call(self, x):
            h = self.ln_1(x)
            x = x + self.attn(h, h, use_causal_mask=True)
            return x + self.mlp_proj(self.mlp_fc(self.ln_2(x)))

    class GPT(keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.wte = L.Embedding(VOCAB_SIZE, N_EMBD)
            self.wpe = L.Embedding(BLOCK_SIZE, N_EMBD)
            self.blocks = [Block() for _ in range(N_LAYER)]
            self.ln_f = L.LayerNormalization(epsilon=1e-5)

        def call(self, idx):
            t = keras.ops.shape(idx)[1]
            x = self.wte(idx) + self.wpe(keras.ops.arange(t))
            for block in self.blocks:
                x = block(x)
            x = self.ln_f(x)
            # The LM head is the token embedding, transposed (nanoGPT's weight tying).
            return keras.ops.matmul(x, keras.ops.transpose(self.wte.embeddings))

    return GPT()


def main():
    args = parse_args(__doc__.splitlines()[0], "TensorFlow's intra- and inter-op threads")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    try:
        import tensorflow as tf
    except ImportError as e:
        log(f"TensorFlow is not installed for {sys.executable}: {e}")
        return EXIT_UNAVAILABLE
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    keras = tf.keras
    log(f"tensorflow {tf.__version__}, keras {keras.__version__}, {args.threads} intra- and inter-op "
        f"threads (os.cpu_count() {os.cpu_count()})")

    keras.utils.set_random_seed(0)
    model = build_model(keras)
    rng = tf.random.Generator.from_seed(1)
    x = rng.uniform([BATCH_SIZE, BLOCK_SIZE], 0, VOCAB_SIZE, dtype=tf.int32)
    y = rng.uniform([BATCH_SIZE, BLOCK_SIZE], 0, VOCAB_SIZE, dtype=tf.int32)
    model(x)  # builds the weights
    log(f"{model.count_params()} parameters")

    # Keras's CosineDecay counts decay_steps from the end of the warm-up; nanoGPT's decay ends at
    # step LR_DECAY_ITERS counted from 0.
    schedule = keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0, warmup_target=LEARNING_RATE, warmup_steps=WARMUP_ITERS,
        decay_steps=LR_DECAY_ITERS - WARMUP_ITERS, alpha=MIN_LR / LEARNING_RATE)
    # epsilon as torch.optim.AdamW's (Keras's default is 1e-7).
    optimizer = keras.optimizers.AdamW(learning_rate=schedule, weight_decay=WEIGHT_DECAY, beta_1=BETAS[0],
                                       beta_2=BETAS[1], epsilon=1e-8, global_clipnorm=GRAD_CLIP)
    # Matched against each variable's name ("kernel", "bias", "gamma", "beta", "embeddings"):
    # kernels and embeddings decay, as nanoGPT's rank >= 2 parameters.
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
    decayed = [v for v in model.trainable_variables if optimizer._use_weight_decay(v)]
    log(f"{len(decayed)} decayed variables, {sum(int(v.numpy().size) for v in decayed)} parameters; "
        f"{len(model.trainable_variables) - len(decayed)} not decayed")
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            logits = model(xb, training=True)
            loss = loss_fn(yb, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    # The step is done once its loss is on the host.
    times_ms, first_loss, last_loss = time_steps(lambda: float(train_step(x, y).numpy()), args.warmup, args.steps)
    lr = float(keras.ops.convert_to_numpy(schedule(optimizer.iterations)))
    print_results(log, times_ms, first_loss, last_loss,
                  f"at step {int(optimizer.iterations.numpy())} (learning rate now {lr:.3g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
