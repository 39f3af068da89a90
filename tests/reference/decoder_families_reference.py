#!/usr/bin/env python3
# Reference test for the llama-like families hftrain builds on its shared decoder (qwen2, mistral, qwen3, gemma,
# phi3):
# HF-layout directories (config.json + safetensors, single-file and sharded) with random weights are made
# here; an independent float64 forward written here from the families' published architecture (Qwen2: q/k/v
# biases, o without; sliding-window layers from max_window_layers when use_sliding_window; Mistral: every layer
# slides over `sliding_window` keys; Qwen3: an RMSNorm over head_dim of each q and k head before rotary,
# head_dim explicit, attention_bias on q/k/v/o; Gemma: RMSNorms scaling by (1 + weight), embeddings times
# sqrt(hidden_size), the gated MLP's activation `hidden_activation` else `hidden_act`, attention_bias on q/k/v/o,
# a tied head by default; Phi-3: q/k/v fused into qkv_proj (q rows, then k, then v), gate and up into gate_up_proj
# (gate rows first), rotary over the first partial_rotary_factor of each head's dims, every layer sliding over
# `sliding_window` keys as Mistral's) gives the expected logits, loss and the gradient of the loss
# for every parameter. hftrain loads each directory through model.from_pretrained (the hidden Catch2 case
# "[decoder_ref]") and must agree to 1e-5; the directory it saves must load here with the same logits.
# Cases cover where each difference matters: sequences longer than the window (the window binds: the logits
# differ from full attention), a tied head, grouped-query heads, right padding.
# Sliding window convention: a query sees `sliding_window` keys, itself included (transformers' current
# masking_utils: kv_idx > q_idx - window). Needs only Python 3 and torch. Exit 0 = agreement.
import json
import math
import os
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit("decoder_families_reference: this Python (%s) cannot import torch; configure with "
             "-DHFTRAIN_REFERENCE_PYTHON=/path/to/python3" % sys.executable)

from hf_family_forwards import NEG, causal_loss  # noqa: E402
from hf_reference_harness import (check_all_cases, compare_outputs, close, rand, read_model_dir,  # noqa: E402
                                  write_model_dir)
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402

ENV, TAG = "HFTRAIN_DECODER_REFERENCE_DIR", "[decoder_ref]"


def rms_norm(x, w, eps):
    return w * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))


def norm_for(cfg):
    """The family's RMSNorm: gemma scales by (1 + weight)."""
    if cfg["model_type"] == "gemma":
        return lambda x, w, eps: rms_norm(x, 1.0 + w, eps)
    return rms_norm


ACTIVATIONS = {"silu": F.silu, "gelu": F.gelu, "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh")}


def activation(cfg):
    """The gated MLP's activation: gemma's hidden_activation wins over hidden_act when given."""
    return ACTIVATIONS[cfg.get("hidden_activation") or cfg.get("hidden_act", "silu")]


def layer_windows(cfg):
    """Per layer: the keys a query sees (itself included), or None for full attention."""
    n = cfg["num_hidden_layers"]
    if cfg["model_type"] in ("mistral", "phi3"):
        return [cfg.get("sliding_window")] * n
    if not cfg.get("use_sliding_window", False):
        return [None] * n
    types = cfg.get("layer_types") or ["sliding_attention" if i >= cfg["max_window_layers"] else "full_attention"
                                       for i in range(n)]
    return [cfg["sliding_window"] if t == "sliding_attention" else None for t in types]


def projections(cfg):
    """Which of q, k, v, o carry a bias, and whether q / k heads are normalised."""
    family = cfg["model_type"]
    if family == "qwen2":
        return {"q": True, "k": True, "v": True, "o": False}, False
    if family in ("qwen3", "gemma"):
        b = cfg.get("attention_bias", False)
        return {"q": b, "k": b, "v": b, "o": b}, family == "qwen3"
    return {"q": False, "k": False, "v": False, "o": False}, False


def forward(cfg, W, ids, mask):
    g = lambda n: W[n].double()  # noqa: E731
    B, T = ids.shape
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    D = cfg.get("head_dim") or C // H
    eps = cfg["rms_norm_eps"]
    biases, qk_norm = projections(cfg)
    norm, act = norm_for(cfg), activation(cfg)
    fused = cfg["model_type"] == "phi3"
    R = int(D * cfg.get("partial_rotary_factor", 1.0))  # rotary dims of each head
    inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, R, 2, dtype=torch.float64) / R))
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()

    def rope(t):  # rotate_half: (x1, x2) -> (-x2, x1) on the two halves of the first R dims; the rest as is
        r = t[..., :R]
        return torch.cat([r * cos + torch.cat([-r[..., R // 2:], r[..., :R // 2]], -1) * sin, t[..., R:]], -1)

    def lin(x, name, bias):
        y = x @ g(name + ".weight").T
        return y + g(name + ".bias") if bias else y

    pad = (1.0 - mask.double())[:, None, None, :] * NEG
    x = g("model.embed_tokens.weight")[ids]
    if cfg["model_type"] == "gemma":
        x = x * math.sqrt(C)
    for i, window in enumerate(layer_windows(cfg)):
        p = "model.layers.%d." % i
        h = norm(x, g(p + "input_layernorm.weight"), eps)
        if fused:
            qkv = h @ g(p + "self_attn.qkv_proj.weight").T
            q, k, v = qkv[..., :H * D], qkv[..., H * D:(H + KV) * D], qkv[..., (H + KV) * D:]
        else:
            q, k, v = (lin(h, p + "self_attn.%s_proj" % n, biases[n]) for n in "qkv")
        q, k, v = q.reshape(B, T, H, D), k.reshape(B, T, KV, D), v.reshape(B, T, KV, D)
        if qk_norm:  # per head, before rotary
            q = rms_norm(q, g(p + "self_attn.q_norm.weight"), eps)
            k = rms_norm(k, g(p + "self_attn.k_norm.weight"), eps)
        q, k, v = rope(q.transpose(1, 2)), rope(k.transpose(1, 2)), v.transpose(1, 2)
        k = torch.stack([k[:, j // (H // KV)] for j in range(H)], 1)  # query head j reads kv head j // (H / KV)
        v = torch.stack([v[:, j // (H // KV)] for j in range(H)], 1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(D)
        qi, kj = torch.arange(T)[:, None], torch.arange(T)[None, :]
        hidden = kj > qi
        if window is not None:
            hidden = hidden | (kj <= qi - window)
        scores = scores.masked_fill(hidden, NEG) + pad
        probs = torch.softmax(scores, -1)
        y = (probs @ v).transpose(1, 2).reshape(B, T, H * D)
        x = x + lin(y, p + "self_attn.o_proj", biases["o"])
        h = norm(x, g(p + "post_attention_layernorm.weight"), eps)
        if fused:
            gate, up = (h @ g(p + "mlp.gate_up_proj.weight").T).chunk(2, -1)
        else:
            gate, up = h @ g(p + "mlp.gate_proj.weight").T, h @ g(p + "mlp.up_proj.weight").T
        x = x + (act(gate) * up) @ g(p + "mlp.down_proj.weight").T
    x = norm(x, g("model.norm.weight"), eps)
    head = g("model.embed_tokens.weight") if cfg.get("tie_word_embeddings", False) else g("lm_head.weight")
    return x @ head.T


def weights(gen, cfg):
    C, V, I = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    H = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    D = cfg.get("head_dim") or C // H
    biases, qk_norm = projections(cfg)
    nm = 0.0 if cfg["model_type"] == "gemma" else 1.0  # a norm's weight around its identity
    W = {"model.embed_tokens.weight": rand(gen, V, C, std=0.5)}
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        W[p + "input_layernorm.weight"] = rand(gen, C, std=0.1, mean=nm)
        if cfg["model_type"] == "phi3":
            W[p + "self_attn.qkv_proj.weight"] = rand(gen, (H + 2 * KV) * D, C)
        for n, rows in (("q", H * D), ("k", KV * D), ("v", KV * D)) if cfg["model_type"] != "phi3" else ():
            W[p + "self_attn.%s_proj.weight" % n] = rand(gen, rows, C)
            if biases[n]:
                W[p + "self_attn.%s_proj.bias" % n] = rand(gen, rows, std=0.2)
        W[p + "self_attn.o_proj.weight"] = rand(gen, C, H * D)
        if biases["o"]:
            W[p + "self_attn.o_proj.bias"] = rand(gen, C, std=0.2)
        if qk_norm:
            W[p + "self_attn.q_norm.weight"] = rand(gen, D, std=0.1, mean=nm)
            W[p + "self_attn.k_norm.weight"] = rand(gen, D, std=0.1, mean=nm)
        W[p + "post_attention_layernorm.weight"] = rand(gen, C, std=0.1, mean=nm)
        if cfg["model_type"] == "phi3":
            W[p + "mlp.gate_up_proj.weight"] = rand(gen, 2 * I, C)
        else:
            W[p + "mlp.gate_proj.weight"] = rand(gen, I, C)
            W[p + "mlp.up_proj.weight"] = rand(gen, I, C)
        W[p + "mlp.down_proj.weight"] = rand(gen, C, I)
    W["model.norm.weight"] = rand(gen, C, std=0.1, mean=nm)
    if not cfg.get("tie_word_embeddings", False):
        W["lm_head.weight"] = rand(gen, V, C)
    return W


def base_config(model_type, arch, **extra):
    cfg = {"model_type": model_type, "architectures": [arch], "vocab_size": 43, "hidden_size": 32,
           "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "hidden_act": "silu", "max_position_embeddings": 32, "initializer_range": 0.02, "rms_norm_eps": 1e-6,
           "rope_theta": 10000.0, "rope_scaling": None, "tie_word_embeddings": False, "attention_dropout": 0.0,
           "bos_token_id": 1, "eos_token_id": 2, "use_cache": True, "torch_dtype": "float32",
           "transformers_version": "4.51.0"}
    cfg.update(extra)
    return cfg


QWEN_WINDOW = {"use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 28}
CASES = [
    # name, config, shards
    ("qwen2", base_config("qwen2", "Qwen2ForCausalLM", **QWEN_WINDOW), 1),
    ("qwen2_tied_sharded", base_config("qwen2", "Qwen2ForCausalLM", tie_word_embeddings=True, num_key_value_heads=1,
                                       **QWEN_WINDOW), 3),
    ("qwen2_sliding", base_config("qwen2", "Qwen2ForCausalLM", use_sliding_window=True, sliding_window=4,
                                  max_window_layers=1), 1),
    ("mistral_window", base_config("mistral", "MistralForCausalLM", sliding_window=5), 1),
    ("mistral_no_window", base_config("mistral", "MistralForCausalLM", sliding_window=None, tie_word_embeddings=True), 2),
    ("qwen3", base_config("qwen3", "Qwen3ForCausalLM", head_dim=12, attention_bias=False, **QWEN_WINDOW), 1),
    ("qwen3_bias_sliding", base_config("qwen3", "Qwen3ForCausalLM", head_dim=6, attention_bias=True,
                                       use_sliding_window=True, sliding_window=3, max_window_layers=0), 1),
    ("gemma", base_config("gemma", "GemmaForCausalLM", head_dim=12, hidden_act="gelu_pytorch_tanh",
                          hidden_activation=None, attention_bias=False, tie_word_embeddings=True), 1),
    ("gemma_untied_bias", base_config("gemma", "GemmaForCausalLM", head_dim=6, hidden_act="silu",
                                      hidden_activation="gelu_pytorch_tanh", attention_bias=True), 2),
    ("phi3_partial_window", base_config("phi3", "Phi3ForCausalLM", partial_rotary_factor=0.5, sliding_window=5,
                                        resid_pdrop=0.0, embd_pdrop=0.0, original_max_position_embeddings=32), 1),
    ("phi3_full_rotary", base_config("phi3", "Phi3ForCausalLM", partial_rotary_factor=1.0, sliding_window=None,
                                     num_key_value_heads=4), 2),
]
T = 12  # longer than every window above


def full_attention(cfg):
    return dict(cfg, use_sliding_window=False, sliding_window=None)


def make_cases(root):
    gen = torch.Generator().manual_seed(2468)
    cases = []
    for name, cfg, shards in CASES:
        W = weights(gen, cfg)
        ids = torch.randint(3, 43, (2, T), generator=gen)
        mask = torch.ones(2, T, dtype=torch.int64)
        mask[1, T - 3:] = 0  # right padding in the second row
        labels = ids.clone()
        labels[1, T - 3:] = -100
        leaves = {k: v.double().requires_grad_() for k, v in W.items()}
        logits = forward(cfg, leaves, ids, mask)
        loss = causal_loss(logits, labels)
        loss.backward()
        if any(w is not None for w in layer_windows(cfg)):  # the window must bind
            if (forward(full_attention(cfg), W, ids, mask) - logits.detach()).abs().max().item() < 1e-3:
                raise AssertionError("%s: the sliding window does not change the logits" % name)
        d = os.path.join(root, name)
        write_model_dir(os.path.join(d, "model"), cfg, W, shards=shards)
        inputs = {"input_ids": ids, "attention_mask": mask, "labels": labels}
        write_safetensors(os.path.join(d, "inputs.safetensors"), list(inputs.items()))
        cases.append({"name": name, "dir": d, "config": cfg, "weights": W, "inputs": inputs,
                      "logits": logits.detach(), "loss": loss.detach(),
                      "grads": {k: v.grad for k, v in leaves.items()}})
    return cases


def check_case(case, failures):
    name = case["name"]
    got_path = os.path.join(case["dir"], "hftrain_output.safetensors")
    if not os.path.exists(got_path):
        failures.append("%s: hftrain wrote no output" % name)
        return
    got, _ = read_safetensors(got_path)
    # Logits at the padding: a padded query whose window holds only padding attends to nothing real, and what
    # it then gives is no implementation's definition (HF's uniform softmax over masked keys included).
    real = case["inputs"]["attention_mask"].bool()
    worst = compare_outputs(name, got, case, (("logits", got["logits"][real], case["logits"][real]),
                                              ("loss", got["loss"], case["loss"].reshape(1))), failures)
    # the directory hftrain saved: HF names, the same weights, and the same logits here from its config.json
    d = os.path.join(case["dir"], "resaved")
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    for key in ("model_type", "architectures", "num_key_value_heads", "tie_word_embeddings"):
        if cfg.get(key) != case["config"].get(key):
            failures.append("%s: resaved %s %r, original %r" % (name, key, cfg.get(key), case["config"].get(key)))
    W = read_model_dir(d)
    if set(W) != set(case["weights"]) or any(not torch.equal(W[k], case["weights"][k]) for k in W):
        failures.append("%s: resaved tensors differ" % name)
        return
    i = case["inputs"]
    ok, err = close(forward(cfg, W, i["input_ids"], i["attention_mask"])[real], case["logits"][real])
    if not ok:
        failures.append("%s: logits from the saved directory differ by %.3g" % (name, err))
    print("%-22s loss %.8f vs %.8f, %d gradients, worst rel err %.3g" % (name, got["loss"].item(), case["loss"].item(),
                                                                          len(case["grads"]), worst))


def main():
    return check_all_cases("decoder_families_reference", "decoders", make_cases, check_case, ENV, TAG)


if __name__ == "__main__":
    sys.exit(main())
