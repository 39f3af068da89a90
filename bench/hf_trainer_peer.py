#!/usr/bin/env python3
"""The torch sides of bench/gpu_peer.py (issue 60), each run as its own process by it:

  init  writes the model directory every side starts from: with transformers, AutoModelForCausalLM.from_config
        under the seed and save_pretrained (safetensors); without it, the HF-named model below, initialised as
        HF's _init_weights does, its config.json written here.
  hf    HF Trainer on the rows of --data: TrainingArguments bf16, optim adamw_torch_fused, the model loaded with
        attn_implementation "sdpa" in float32 (Trainer's AMP does the bf16), the rows in hftrain's epoch order.
  loop  a plain PyTorch loop over the same rows: the model below (HF's parameter names, so it loads the same
        safetensors; SDPA where this torch has it, else the masked softmax), torch.autocast bf16, AdamW (fused
        on CUDA), clip_grad_norm_, HF's linear schedule with warmup.

Each side writes one JSON object to --result: the logged losses with their wall-clock times, train_runtime,
peak GPU memory (torch.cuda.max_memory_allocated) and versions.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from python_loop import linear  # noqa: E402  HF's linear schedule with warmup


def causal_attention(q, k, v):
    """[B, heads, T, d] each; SDPA (torch >= 2.0) or the masked softmax it computes."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    T = q.size(-2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    return F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1) @ v


def lm_loss(logits, labels):
    """HF's causal-LM loss: position t predicts t + 1, logits upcast to float32."""
    return F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1))


# ----- GPT-2 in HF GPT2LMHeadModel's names and Conv1D layout (weight [in, out]), gelu_new, tied head
class Conv1D(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return F.linear(x, self.weight.t(), self.bias)


class Gpt2Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.c_attn, self.c_proj, self.heads = Conv1D(d, 3 * d), Conv1D(d, d), heads

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in self.c_attn(x).split(C, dim=2))
        return self.c_proj(causal_attention(q, k, v).transpose(1, 2).reshape(B, T, C))


class Gpt2Mlp(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc, self.c_proj = Conv1D(d, 4 * d), Conv1D(4 * d, d)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Gpt2Block(nn.Module):
    def __init__(self, d, heads, eps):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(d, eps=eps), Gpt2Attention(d, heads)
        self.ln_2, self.mlp = nn.LayerNorm(d, eps=eps), Gpt2Mlp(d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt2(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, eps = c["n_embd"], c["layer_norm_epsilon"]
        self.transformer = nn.Module()
        self.transformer.wte = nn.Embedding(c["vocab_size"], d)
        self.transformer.wpe = nn.Embedding(c["n_positions"], d)
        self.transformer.h = nn.ModuleList([Gpt2Block(d, c["n_head"], eps) for _ in range(c["n_layer"])])
        self.transformer.ln_f = nn.LayerNorm(d, eps=eps)

    def init_as_hf(self, c):
        for name, p in self.named_parameters():
            if ".ln_" in name or name.startswith("transformer.ln_f"):
                nn.init.ones_(p) if name.endswith("weight") else nn.init.zeros_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
            else:  # HF scales the residual projections by 1/sqrt(2 x layers)
                std = c["initializer_range"] / (math.sqrt(2 * c["n_layer"]) if name.endswith("c_proj.weight") else 1)
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, labels):
        t = self.transformer
        x = t.wte(idx) + t.wpe(torch.arange(idx.size(1), device=idx.device))
        for block in t.h:
            x = block(x)
        return lm_loss(F.linear(t.ln_f(x), t.wte.weight), labels)


# ----- Llama in HF LlamaForCausalLM's names: RMSNorm in float32, rotary halves, grouped-query attention, SwiGLU
class RmsNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(n)), eps

    def forward(self, x):
        h = x.float()
        return self.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


def rotate_half(x):
    half = x.size(-1) // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, d, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.q_proj = nn.Linear(d, heads * self.hd, bias=False)
        self.k_proj = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.v_proj = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.o_proj = nn.Linear(heads * self.hd, d, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.size()
        q = self.q_proj(x).view(B, T, self.heads, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.kv_heads, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.kv_heads, self.hd).transpose(1, 2)
        cos, sin = cos.to(q.dtype), sin.to(q.dtype)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        rep = self.heads // self.kv_heads  # HF's repeat_kv: query head j reads key/value head j // rep
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        return self.o_proj(causal_attention(q, k, v).transpose(1, 2).reshape(B, T, -1))


class LlamaMlp(nn.Module):
    def __init__(self, d, inner):
        super().__init__()
        self.gate_proj, self.up_proj = nn.Linear(d, inner, bias=False), nn.Linear(d, inner, bias=False)
        self.down_proj = nn.Linear(inner, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, eps = c["hidden_size"], c["rms_norm_eps"]
        self.input_layernorm, self.post_attention_layernorm = RmsNorm(d, eps), RmsNorm(d, eps)
        self.self_attn = LlamaAttention(d, c["num_attention_heads"], c["num_key_value_heads"])
        self.mlp = LlamaMlp(d, c["intermediate_size"])

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["hidden_size"]
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(c["vocab_size"], d)
        self.model.layers = nn.ModuleList([LlamaLayer(c) for _ in range(c["num_hidden_layers"])])
        self.model.norm = RmsNorm(d, c["rms_norm_eps"])
        self.lm_head = nn.Linear(d, c["vocab_size"], bias=False)
        if c["tie_word_embeddings"]:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.hd, self.theta = d // c["num_attention_heads"], c["rope_theta"]

    def init_as_hf(self, c):
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, c["initializer_range"])

    def forward(self, idx, labels):
        T = idx.size(1)
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2, device=idx.device).float() / self.hd))
        freqs = torch.outer(torch.arange(T, device=idx.device).float(), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin, x = emb.cos(), emb.sin(), self.model.embed_tokens(idx)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        return lm_loss(self.lm_head(self.model.norm(x)), labels)


MODELS = {"gpt2": (Gpt2, "GPT2LMHeadModel"), "llama": (Llama, "LlamaForCausalLM")}


# ----- files: safetensors (the safetensors package when present, else the repo's reference reader / writer)
def save_weights(path, named):
    try:
        from safetensors.torch import save_file
        save_file({k: v.contiguous() for k, v in named}, path, metadata={"format": "pt"})
    except ImportError:  # element by element: fine for the tiny smoke shapes, slow for 124M
        sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
        from safetensors_io import write_safetensors
        write_safetensors(path, named, {"format": "pt"})


def load_weights(model_dir):
    index = os.path.join(model_dir, "model.safetensors.index.json")
    files = ["model.safetensors"]
    if os.path.exists(index):
        files = sorted(set(json.load(open(index))["weight_map"].values()))
    out = {}
    for name in files:
        try:
            from safetensors.torch import load_file
            out.update(load_file(os.path.join(model_dir, name)))
        except ImportError:
            sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
            from safetensors_io import read_safetensors
            out.update(read_safetensors(os.path.join(model_dir, name))[0])
    return out


def read_rows(path, seq):
    """The data file: little-endian uint32 token ids, rows of seq tokens one after the other."""
    with open(path, "rb") as f:
        blob = bytearray(f.read())
    return torch.frombuffer(blob, dtype=torch.int32).to(torch.int64).view(-1, seq)


def epoch_order(n, seed):
    """hftrain's (and accelerate's seedable sampler's) first epoch: torch.randperm(n) seeded with the seed."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))


def versions(device):
    v = {"python": sys.version.split()[0], "torch": torch.__version__}
    if device.type == "cuda":
        v["gpu"] = torch.cuda.get_device_name(device)
    return v


def hf_version(transformers):
    return tuple(int(p) for p in transformers.__version__.split(".")[:2])


# ----- the sides
def run_init(a, shape):
    c, (cls, arch) = shape["config"], MODELS[shape["model_type"]]
    os.makedirs(a.model, exist_ok=True)
    try:
        import transformers
        from transformers import AutoConfig, AutoModelForCausalLM
    except ImportError:
        transformers = None
    torch.manual_seed(a.seed)
    if transformers is not None and not a.no_transformers:
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(shape["model_type"], **c))
        kw = {} if hf_version(transformers) >= (5, 0) else {"safe_serialization": True}  # v5: always safetensors
        model.save_pretrained(a.model, max_shard_size="50GB", **kw)
        how = "transformers %s AutoModelForCausalLM.from_config, save_pretrained" % transformers.__version__
    else:
        model = cls(c)
        model.init_as_hf(c)
        tied = c.get("tie_word_embeddings")
        named = [(k, v) for k, v in model.state_dict().items() if not (k == "lm_head.weight" and tied)]
        save_weights(os.path.join(a.model, "model.safetensors"), named)
        cfg = dict(c, model_type=shape["model_type"], architectures=[arch], torch_dtype="float32")
        with open(os.path.join(a.model, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        how = "this file's %s, HF's init scheme (transformers not importable)" % cls.__name__
    params = sum(p.numel() for p in model.parameters())  # tied tensors once
    return {"weights": how, "parameters": params, "versions": versions(torch.device("cpu"))}


def run_loop(a, shape):
    dev = torch.device(a.device)
    model = MODELS[shape["model_type"]][0](shape["config"])
    state = load_weights(a.model)
    missing, _ = model.load_state_dict(state, strict=False)  # extra HF buffers (attn.bias, inv_freq) are ignored
    missing = [k for k in missing if not (k == "lm_head.weight" and shape["config"].get("tie_word_embeddings"))]
    if missing:
        raise SystemExit("loop: %s lacks %s" % (a.model, ", ".join(missing[:5])))
    del state
    model.to(dev).train()
    rows = read_rows(a.data, a.seq)
    order = epoch_order(len(rows), a.seed)
    extra = {"fused": True} if dev.type == "cuda" else {}
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, **extra)
    bf16 = a.precision == "bf16"
    logs, window = [], torch.zeros((), device=dev)
    start = time.time()
    for step in range(a.steps):
        for g in opt.param_groups:
            g["lr"] = linear(step, a.warmup, a.steps, a.lr)
        x = rows[order[step * a.batch:(step + 1) * a.batch]].to(dev, non_blocking=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            loss = model(x, x)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        window += loss.detach()
        if (step + 1) % a.logging_steps == 0:  # the mean over the window, as Trainer logs it; .item() waits
            logs.append({"step": step + 1, "loss": window.item() / a.logging_steps, "time": time.time()})
            window.zero_()
    runtime = time.time() - start
    return {"logs": logs, "train_runtime": runtime, "steps": a.steps, "fused_adamw": bool(extra),
            "attention": "sdpa" if hasattr(F, "scaled_dot_product_attention") else "masked softmax",
            "peak_gpu_bytes": torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else None,
            "versions": versions(dev)}


def run_hf(a, shape):
    import dataclasses
    import transformers
    from torch.utils.data import Dataset, SequentialSampler
    from transformers import AutoModelForCausalLM, Trainer, TrainerCallback, TrainingArguments

    rows = read_rows(a.data, a.seq)
    rows = rows[epoch_order(len(rows), a.seed)]  # hftrain's order, read in sequence below

    class Rows(Dataset):
        def __len__(self):
            return len(rows)

        def __getitem__(self, i):
            return {"input_ids": rows[i], "labels": rows[i]}

    class SameOrder(Trainer):
        def _get_train_sampler(self, *args, **kwargs):
            return SequentialSampler(self.train_dataset)

    class Clock(TrainerCallback):
        logs = []

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:  # the step logs, not the final train summary
                Clock.logs.append({"step": state.global_step, "loss": logs["loss"], "time": time.time()})

    dev = torch.device(a.device)
    dtype_key = "dtype" if hf_version(transformers) >= (4, 56) else "torch_dtype"  # renamed in 4.56
    model = AutoModelForCausalLM.from_pretrained(a.model, attn_implementation="sdpa", **{dtype_key: torch.float32})
    kw = dict(output_dir=a.out_dir, per_device_train_batch_size=a.batch, max_steps=a.steps, learning_rate=a.lr,
              lr_scheduler_type="linear", warmup_steps=a.warmup, max_grad_norm=1.0, weight_decay=0.0,
              logging_steps=a.logging_steps, report_to="none", save_strategy="no", dataloader_num_workers=0,
              seed=a.seed, bf16=a.precision == "bf16", disable_tqdm=True,
              optim="adamw_torch_fused" if dev.type == "cuda" else "adamw_torch")
    if dev.type == "cpu":
        fields = {f.name for f in dataclasses.fields(TrainingArguments)}
        kw["use_cpu" if "use_cpu" in fields else "no_cuda"] = True
    trainer = SameOrder(model=model, args=TrainingArguments(**kw), train_dataset=Rows(), callbacks=[Clock()])
    out = trainer.train()
    v = versions(dev)
    v["transformers"] = transformers.__version__
    return {"logs": Clock.logs, "train_runtime": out.metrics["train_runtime"], "steps": trainer.state.global_step,
            "log_history": trainer.state.log_history, "optim": kw["optim"],
            "peak_gpu_bytes": torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else None, "versions": v}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("side", choices=["init", "hf", "loop"])
    ap.add_argument("--shape", required=True, help="JSON: {model_type, config}")
    ap.add_argument("--model", required=True, help="the model directory")
    ap.add_argument("--result", required=True, help="where the side's JSON result goes")
    ap.add_argument("--data")
    ap.add_argument("--out-dir", help="hf: Trainer's output_dir (nothing is saved)")
    ap.add_argument("--seq", type=int)
    ap.add_argument("--batch", type=int)
    ap.add_argument("--steps", type=int)
    ap.add_argument("--lr", type=float)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--logging-steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--no-transformers", action="store_true", help="init: this file's model even with transformers")
    a = ap.parse_args()
    shape = json.loads(a.shape)
    result = {"init": run_init, "hf": run_hf, "loop": run_loop}[a.side](a, shape)
    with open(a.result, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: v for k, v in result.items() if k != "log_history"}))


if __name__ == "__main__":
    main()
