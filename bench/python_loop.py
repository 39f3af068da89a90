#!/usr/bin/python3
"""The Python side of the benchmarks: a plain PyTorch training loop, written the way a PyTorch user
writes one (nanoGPT-style model code, torch.optim.AdamW, torch.nn.utils.clip_grad_norm_), running the
same workload as an hftrain spec: same model shape and initialisation scheme, same hyperparameters
and learning-rate schedule (HF's formulas), same data and the same loss (HF causal-LM shift).

Prints one JSON object on the last line of stdout:
  {"steps", "tokens_per_step", "train_seconds", "step_ms_median", "final_loss", "eval_loss" | "eval_accuracy"}
train_seconds covers the optimisation steps only (model building and evaluation excluded), as
hftrain's train_runtime does.

Usage: python_loop.py nanogpt --text FILE [--steps N]
       python_loop.py gpt2 --text FILE [--steps N]
       python_loop.py llama --text FILE [--steps N]
       python_loop.py mlp [--steps N]
Thread settings are torch's defaults unless --threads N is given (torch.set_num_threads(N)).
--bf16 runs each forward and loss under torch.autocast(<device type>, dtype=torch.bfloat16), as a PyTorch
user trains in mixed precision (weights and optimizer stay float32). --device cuda trains on the GPU (the
model, every batch and the optimizer there; each step ends with loss.item(), which waits for the GPU).
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


# ----- model: a GPT as nanoGPT writes it (pre-LayerNorm blocks, manual causal attention on torch 1.13)
class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, bias):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.n_head = n_head

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, n_embd, n_head, bias):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)  # with bias, as hftrain's gpt (bias: false drops Linear biases only)
        self.attn = CausalSelfAttention(n_embd, n_head, bias)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=bias)
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=bias)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, bias):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head, bias) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        for name, p in self.named_parameters():
            if "ln_" in name:
                continue
            std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("c_proj.weight") else 0.02
            if name.endswith("bias"):
                nn.init.zeros_(p)
            else:
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, labels):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied head
        # HF causal-LM loss: position t predicts token t + 1.
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1))


# ----- a LLaMA as HF's modeling_llama writes it (RMSNorm in float32, rotary halves, SwiGLU, no biases, untied head)
class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rotate_half(x):
    half = x.size(-1) // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaLayer(nn.Module):
    def __init__(self, hidden, heads, intermediate, eps):
        super().__init__()
        self.heads = heads
        self.input_layernorm = RMSNorm(hidden, eps)
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, hidden, bias=False)
        self.v_proj = nn.Linear(hidden, hidden, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)
        self.post_attention_layernorm = RMSNorm(hidden, eps)
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, C = x.size()
        h = self.input_layernorm(x)
        q, k, v = [p(h).view(B, T, self.heads, C // self.heads).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj)]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        x = x + self.o_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))
        m = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(m)) * self.up_proj(m))


class Llama(nn.Module):
    def __init__(self, vocab_size, n_layer, n_head, hidden, intermediate, eps=1e-6, theta=10000.0):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_size, hidden)
        self.layers = nn.ModuleList([LlamaLayer(hidden, n_head, intermediate, eps) for _ in range(n_layer)])
        self.norm = RMSNorm(hidden, eps)
        self.lm_head = nn.Linear(hidden, vocab_size, bias=False)
        self.head_dim, self.theta = hidden // n_head, theta
        for m in self.modules():  # HF's _init_weights: normal(0, initializer_range) for linear and embedding
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)

    def forward(self, idx, labels):
        T = idx.size(1)
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.head_dim, 2, device=idx.device).float() / self.head_dim))
        freqs = torch.outer(torch.arange(T, device=idx.device).float(), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        mask = torch.ones(T, T, dtype=torch.bool, device=idx.device).tril()
        x = self.embed_tokens(idx)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1))


class MLP(nn.Module):
    def __init__(self, num_features, hidden, num_labels):
        super().__init__()
        sizes = [num_features] + hidden
        self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])])
        self.out = nn.Linear(sizes[-1], num_labels)

    def forward(self, x, labels):
        for layer in self.layers:
            x = F.gelu(layer(x))
        return F.cross_entropy(self.out(x), labels), self.out


# ----- HF's cosine_with_min_lr and linear schedules with warmup
def cosine_with_min_lr(step, warmup, total, lr, min_lr):
    if step < warmup:
        return lr * step / max(1, warmup)
    progress = (step - warmup) / max(1, total - warmup)
    factor = 0.5 * (1.0 + math.cos(math.pi * progress))
    return lr * (factor * (1 - min_lr / lr) + min_lr / lr)


def linear(step, warmup, total, lr):
    if step < warmup:
        return lr * step / max(1, warmup)
    return lr * max(0.0, (total - step) / max(1, total - warmup))


def adamw(model, lr, betas, weight_decay):
    # HF's rule (biases and LayerNorm weights are not decayed); here: every tensor of rank < 2.
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=1e-8)


AUTOCAST = {"enabled": False, "device_type": "cpu"}
DEVICE = {"device": torch.device("cpu")}


def train(model, batches, steps, opt, lr_at, max_grad_norm, tokens_per_step):
    step_ms, last_loss = [], None
    model.train()
    start = time.perf_counter()
    for step in range(steps):
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        x, y = (t.to(DEVICE["device"], non_blocking=True) for t in next(batches))
        with torch.autocast(AUTOCAST["device_type"], dtype=torch.bfloat16, enabled=AUTOCAST["enabled"]):
            loss = model(x, y)
            if isinstance(loss, tuple):
                loss = loss[0]
        loss.backward()
        if max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
        last_loss = loss.item()
        step_ms.append((time.perf_counter() - t0) * 1e3)
    seconds = time.perf_counter() - start
    return {"steps": steps, "tokens_per_step": tokens_per_step, "train_seconds": seconds,
            "step_ms_median": statistics.median(step_ms), "final_loss": last_loss}


def text_blocks(path, tokenizer, block, validation_split):
    text = open(path, "rb").read()
    if tokenizer == "chars":
        s = text.decode("utf-8")
        vocab = sorted(set(s))
        index = {c: i for i, c in enumerate(vocab)}
        ids = torch.tensor([index[c] for c in s], dtype=torch.long)
    else:  # bytes
        ids = torch.tensor(list(text), dtype=torch.long)
        vocab = range(256)
    n_eval = int(len(ids) * validation_split)
    train_ids, eval_ids = ids[: len(ids) - n_eval], ids[len(ids) - n_eval:]
    train_blocks = train_ids[: len(train_ids) // block * block].view(-1, block)
    eval_blocks = eval_ids[: len(eval_ids) // block * block].view(-1, block)
    return len(vocab), train_blocks, eval_blocks


def epochs_of_batches(blocks, batch_size, seed):
    """Shuffled batches, a new permutation each epoch, last partial batch kept (HF's default)."""
    g = torch.Generator().manual_seed(seed)
    while True:
        perm = torch.randperm(len(blocks), generator=g)
        for i in range(0, len(perm), batch_size):
            b = blocks[perm[i:i + batch_size]]
            yield b, b


def lm_workload(args, make_model, block, batch, tokenizer, vocab_override, lr_at, lr, betas, wd, clip):
    """make_model(vocabulary size): the model, built after seeding."""
    vocab, train_blocks, eval_blocks = text_blocks(args.text, tokenizer, block, 0.1)
    torch.manual_seed(1337)
    model = make_model(vocab_override or vocab).to(DEVICE["device"])
    opt = adamw(model, lr, betas, wd)
    result = train(model, epochs_of_batches(train_blocks, batch, 1337), args.steps, opt, lr_at, clip, batch * block)
    if args.eval:
        model.eval()
        total, count = 0.0, 0
        with torch.no_grad():
            for i in range(0, len(eval_blocks), 64):
                b = eval_blocks[i:i + 64].to(DEVICE["device"])
                total += model(b, b).item() * len(b)
                count += len(b)
        result["eval_loss"] = total / count
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload", choices=["nanogpt", "gpt2", "llama", "mlp"])
    ap.add_argument("--text", help="text file (nanogpt: characters, gpt2 and llama: bytes)")
    ap.add_argument("--steps", type=int)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--no-eval", dest="eval", action="store_false")
    ap.add_argument("--bf16", action="store_true", help="torch.autocast(device, torch.bfloat16) around forward and loss")
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    args = ap.parse_args()
    AUTOCAST["enabled"] = args.bf16
    DEVICE["device"] = torch.device(args.device)
    AUTOCAST["device_type"] = DEVICE["device"].type
    if args.threads:
        torch.set_num_threads(args.threads)

    if args.workload == "nanogpt":
        args.steps = args.steps or 2000
        total = 2000
        result = lm_workload(args, lambda v: GPT(v, 64, 4, 4, 128, bias=False), 64, 12, "chars", 0,
                             lambda s: cosine_with_min_lr(s, 100, total, 1e-3, 1e-4), 1e-3, (0.9, 0.99), 0.1, 1.0)
    elif args.workload == "gpt2":
        args.steps = args.steps or 6
        result = lm_workload(args, lambda v: GPT(v, 256, 12, 12, 768, bias=False), 256, 4, "bytes", 50304,
                             lambda s: linear(s, 0, args.steps, 6e-4), 6e-4, (0.9, 0.95), 0.1, 1.0)
    elif args.workload == "llama":
        args.steps = args.steps or 10
        result = lm_workload(args, lambda v: Llama(v, 8, 8, 512, 1376), 256, 4, "bytes", 32000,
                             lambda s: linear(s, 0, args.steps, 3e-4), 3e-4, (0.9, 0.95), 0.1, 1.0)
    else:
        args.steps = args.steps or 3000
        g = torch.Generator().manual_seed(1234)
        num_features, num_labels, n = 16, 4, 4000
        centres = torch.randn(num_labels, num_features, generator=g) * 3
        labels = torch.randint(num_labels, (n,), generator=g)
        features = centres[labels] + torch.randn(n, num_features, generator=g)
        torch.manual_seed(1337)
        model = MLP(num_features, [64, 64], num_labels)
        opt = adamw(model, 1e-3, (0.9, 0.999), 0.0)

        def batches():
            gen = torch.Generator().manual_seed(1337)
            while True:
                perm = torch.randperm(n, generator=gen)
                for i in range(0, n, 32):
                    idx = perm[i:i + 32]
                    yield features[idx], labels[idx]

        result = train(model, batches(), args.steps, opt, lambda s: linear(s, 0, args.steps, 1e-3), 1.0, 32)
        with torch.no_grad():
            model.eval()
            x = features
            for layer in model.layers:
                x = F.gelu(layer(x))
            result["train_accuracy"] = (model.out(x).argmax(-1) == labels).float().mean().item()
    result["threads"] = torch.get_num_threads()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
