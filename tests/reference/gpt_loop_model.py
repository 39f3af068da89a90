# The data and model of gpt_reference.py's PyTorch loop, as hftrain's `gpt` on `digit_reversal` has them:
# the SplitMix64 example generator, the GPT-2-shaped model (pre-LN, exact GELU, tied LM head), its
# deterministic initialisation and HF's decay / no-decay split of its parameters.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

MASK64 = 0xFFFFFFFFFFFFFFFF


# ---- data: digit_reversal -------------------------------------------------------------------------
class SplitMix64:
    def __init__(self, state):
        self.state = state & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)


SPLIT_SALT = {"train": 1, "eval": 2, "test": 3}


def example_stream(seed, split, index):
    g = SplitMix64(((seed * 0x100000001B3) & MASK64) ^ (SPLIT_SALT[split] << 56))
    g.state ^= (index * 0xD1B54A32D192ED03) & MASK64
    g.next()
    return g


def digit_reversal_example(seed, index, num_digits, split="train"):
    g = example_stream(seed, split, index)
    digits = [g.next() % 10 for _ in range(num_digits)]
    ids = digits + [10] + digits[::-1]  # tokens 0-9 are digits, 10 is '='
    labels = [-100] * (num_digits + 1) + ids[num_digits + 1:]
    return ids, labels


# ---- model: GPT-2 shaped, pre-LN, tied LM head -----------------------------------------------------
class Attention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        att = torch.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))  # exact (erf) GELU


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, eps=1e-5)
        self.attn = Attention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd, eps=1e-5)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd):
        super().__init__()
        self.transformer = nn.Module()
        self.transformer.wte = nn.Embedding(vocab_size, n_embd)
        self.transformer.wpe = nn.Embedding(block_size, n_embd)
        self.transformer.h = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.transformer.ln_f = nn.LayerNorm(n_embd, eps=1e-5)

    def forward(self, input_ids, labels):
        T = input_ids.size(1)
        x = self.transformer.wte(input_ids) + self.transformer.wpe(torch.arange(T, dtype=torch.long))
        for block in self.transformer.h:
            x = block(x)
        logits = F.linear(self.transformer.ln_f(x), self.transformer.wte.weight)  # tied head
        # causal LM: position t predicts token t+1
        shift_logits = logits[:, :-1, :].reshape(-1, logits.size(-1))
        return F.cross_entropy(shift_logits, labels[:, 1:].reshape(-1), ignore_index=-100)


def initialise(model, seed):
    # Any deterministic init works (hftrain loads it); this one is GPT-2-like but with perturbed
    # LayerNorm parameters and biases, so that every parameter kind carries a non-trivial value.
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln_" in name or name.startswith("transformer.ln_f"):
                base = 1.0 if name.endswith("weight") else 0.0
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.02 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.05 * torch.randn(p.shape, generator=g))


def is_no_decay(name):
    return name.endswith("bias") or ".ln_" in name or name.startswith("transformer.ln_")
