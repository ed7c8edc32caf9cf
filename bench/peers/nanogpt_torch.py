"""PyTorch's side of the nanoGPT training step: Karpathy's nanoGPT model and training step in its CPU
configuration (character level: vocab 65, n_layer 4, n_head 4, n_embd 128, block_size 64, batch 12,
dropout 0.0, bias True), written as nanoGPT's model.py and train.py write it, on the CPU.

  python3 nanogpt_torch.py [--steps 30] [--warmup 5] [--threads N]

One step is what nanoGPT's training loop does per iteration: set the learning rate of the cosine
schedule (100 linear warm-up steps to 1e-3, then cosine down to 1e-4 at step 2000), forward (token
and learned position embeddings; 4 pre-LayerNorm blocks of causal self-attention with a fused qkv
projection, 4 heads of 32, and an MLP 128-512-128 with exact GELU; final LayerNorm; LM head tied to
the token embedding; cross-entropy), backward, clip_grad_norm_(1.0), AdamW(betas (0.9, 0.99),
weight decay 0.1 on the parameters of rank >= 2 only), zero_grad. Torch 1.13 has no
F.scaled_dot_product_attention, so attention is nanoGPT's "slow" path for old torch: q @ k^T * scale,
masked_fill with the causal tril buffer to -inf, softmax, @ v. The inputs are random ids in [0, 65)
of shape [12, 64] and their targets likewise, made once. Prints on stdout only:

  step_ms=<median ms of a timed step>
  tokens_per_s=<12*64 tokens / median step seconds>
  loss=<the loss of the last step>

Logs (the thread count among them) go to stderr. --threads defaults to os.cpu_count(): Debian's torch
starts with one thread on these machines. Exit 3 when torch is not installed for this interpreter
(scripts/bench installs Debian's python3-torch for /usr/bin/python3).
"""
import math
import os
import sys

from nanogpt_common import (BATCH_SIZE, BETAS, BIAS, BLOCK_SIZE, DROPOUT, EXIT_UNAVAILABLE, GRAD_CLIP,
                            LEARNING_RATE, LR_DECAY_ITERS, MIN_LR, N_EMBD, N_HEAD, N_LAYER, VOCAB_SIZE,
                            WARMUP_ITERS, WEIGHT_DECAY, logger, parse_args, print_results, time_steps)

log = logger("nanogpt_torch")


def build_model(torch):
    """nanoGPT's model.py (GPT, Block, MLP, CausalSelfAttention, LayerNorm), without generation."""
    import torch.nn as nn
    from torch.nn import functional as F

    class LayerNorm(nn.Module):
        """LayerNorm with an optional bias (nanoGPT's; PyTorch's has no bias=False before 2.1)."""

        def __init__(self, ndim, bias):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(ndim))
            self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

        def forward(self, input):
            return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            assert N_EMBD % N_HEAD == 0
            self.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD, bias=BIAS)  # q, k, v of all heads at once
            self.c_proj = nn.Linear(N_EMBD, N_EMBD, bias=BIAS)
            self.attn_dropout = nn.Dropout(DROPOUT)
            self.resid_dropout = nn.Dropout(DROPOUT)
            self.n_head = N_HEAD
            self.n_embd = N_EMBD
            # The slow path (no flash attention before torch 2.0): the causal mask as a buffer.
            self.register_buffer("bias", torch.tril(torch.ones(BLOCK_SIZE, BLOCK_SIZE))
                                 .view(1, 1, BLOCK_SIZE, BLOCK_SIZE))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v  # (B, nh, T, hs)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(N_EMBD, 4 * N_EMBD, bias=BIAS)
            self.gelu = nn.GELU()  # exact (erf)
            self.c_proj = nn.Linear(4 * N_EMBD, N_EMBD, bias=BIAS)
            self.dropout = nn.Dropout(DROPOUT)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = LayerNorm(N_EMBD, bias=BIAS)
            self.attn = CausalSelfAttention()
            self.ln_2 = LayerNorm(N_EMBD, bias=BIAS)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            x = x + self.mlp(self.ln_2(x))
            return x

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(VOCAB_SIZE, N_EMBD),
                wpe=nn.Embedding(BLOCK_SIZE, N_EMBD),
                drop=nn.Dropout(DROPOUT),
                h=nn.ModuleList([Block() for _ in range(N_LAYER)]),
                ln_f=LayerNorm(N_EMBD, bias=BIAS),
            ))
            self.lm_head = nn.Linear(N_EMBD, VOCAB_SIZE, bias=False)
            self.transformer.wte.weight = self.lm_head.weight  # weight tying
            self.apply(self._init_weights)
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * N_LAYER))

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets):
            b, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
            tok_emb = self.transformer.wte(idx)  # (b, t, n_embd)
            pos_emb = self.transformer.wpe(pos)  # (t, n_embd)
            x = self.transformer.drop(tok_emb + pos_emb)
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            return logits, loss

        def configure_optimizers(self, weight_decay, learning_rate, betas):
            # Every parameter of rank >= 2 (matmul weights, embeddings) decays; biases and LayerNorm
            # weights do not. named_parameters lists the tied wte/lm_head weight once.
            param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
            decay_params = [p for p in param_dict.values() if p.dim() >= 2]
            nodecay_params = [p for p in param_dict.values() if p.dim() < 2]
            optim_groups = [
                {"params": decay_params, "weight_decay": weight_decay},
                {"params": nodecay_params, "weight_decay": 0.0},
            ]
            log(f"{len(decay_params)} decayed tensors, {sum(p.numel() for p in decay_params)} parameters; "
                f"{len(nodecay_params)} non-decayed tensors, {sum(p.numel() for p in nodecay_params)} parameters")
            # nanoGPT asks for fused=True on CUDA only; on the CPU, plain AdamW.
            return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)

    return GPT()


def get_lr(it):
    """nanoGPT train.py's schedule: linear warm-up, then cosine decay down to MIN_LR."""
    if it < WARMUP_ITERS:
        return LEARNING_RATE * (it + 1) / (WARMUP_ITERS + 1)
    if it > LR_DECAY_ITERS:
        return MIN_LR
    decay_ratio = (it - WARMUP_ITERS) / (LR_DECAY_ITERS - WARMUP_ITERS)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return MIN_LR + coeff * (LEARNING_RATE - MIN_LR)


def main():
    args = parse_args(__doc__.splitlines()[0], "torch.set_num_threads")
    try:
        import torch
    except ImportError as e:
        log(f"PyTorch is not installed for {sys.executable}: {e}")
        return EXIT_UNAVAILABLE
    torch.set_num_threads(args.threads)
    log(f"torch {torch.__version__}, {torch.get_num_threads()} threads "
        f"(os.cpu_count() {os.cpu_count()})")

    torch.manual_seed(0)
    model = build_model(torch)
    model.train()
    log(f"{sum(p.numel() for p in model.parameters())} parameters")
    optimizer = model.configure_optimizers(WEIGHT_DECAY, LEARNING_RATE, BETAS)

    gen = torch.Generator().manual_seed(1)
    x = torch.randint(0, VOCAB_SIZE, (BATCH_SIZE, BLOCK_SIZE), generator=gen)
    y = torch.randint(0, VOCAB_SIZE, (BATCH_SIZE, BLOCK_SIZE), generator=gen)

    iter_num = 0

    def one_step():
        # train.py's iteration, gradient_accumulation_steps 1 (as config/train_shakespeare_char.py);
        # its GradScaler is disabled on the CPU, and its autocast context is a nullcontext there.
        nonlocal iter_num
        lr = get_lr(iter_num)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        iter_num += 1
        return loss  # PyTorch on the CPU is synchronous: the step is done when this returns

    times_ms, first_loss, last_loss = time_steps(lambda: one_step().item(), args.warmup, args.steps)
    print_results(log, times_ms, first_loss, last_loss, f"at step {iter_num}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
