#!/usr/bin/env python3
# Reference test for hftrain's gemma2 (Gemma2ForCausalLM) and gemma3_text (Gemma3ForCausalLM) on its shared decoder:
# HF-layout directories (config.json + safetensors) with random weights are made here; an independent float64 forward
# written here from the published architecture gives the expected logits, loss and the gradient of the loss for
# every parameter. Gemma 2: RMSNorms scaling by (1 + weight); embeddings times sqrt(hidden_size); per layer
# x + post_attention_layernorm(attn(input_layernorm(x))), then x + post_feedforward_layernorm(mlp(
# pre_feedforward_layernorm(x))); scores times query_pre_attn_scalar^-0.5, soft-capped as
# cap * tanh(scores / cap) (attn_logit_softcapping) before the causal / window / padding mask; layer i slides over
# `sliding_window` keys (itself included) when (i + 1) % 2 != 0, unless layer_types says otherwise; the gated MLP's
# activation hidden_activation; logits soft-capped by final_logit_softcapping; a tied head by default. Gemma 3
# (text): the same with an RMSNorm ((1 + weight), over head_dim) of each q and k head before rotary, sliding layers
# where (i + 1) % sliding_window_pattern != 0, and the sliding layers' rotary unscaled at rope_local_base_freq while
# the global layers turn at rope_theta with rope_scaling (linear here); transformers v5 writes the two rotaries as
# rope_parameters keyed by layer type. hftrain loads each directory through model.from_pretrained (the hidden
# Catch2 case "[decoder_ref]") and must agree to 1e-5; the directory it saves must load here (from either form of
# its rotary keys, which must agree) with the same logits. Each case checks that what it tests binds: the window,
# the soft-caps, query_pre_attn_scalar, the local rotary base and the scaling change the logits.
# Needs only Python 3 and torch. Exit 0 = agreement.
import json
import math
import os
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit("gemma_reference: this Python (%s) cannot import torch; configure with "
             "-DHFTRAIN_REFERENCE_PYTHON=/path/to/python3" % sys.executable)

from hf_family_forwards import NEG, causal_loss  # noqa: E402
from hf_reference_harness import (check_all_cases, close, compare_outputs, rand, read_model_dir,  # noqa: E402
                                  write_model_dir)
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402

ENV, TAG = "HFTRAIN_DECODER_REFERENCE_DIR", "[decoder_ref]"
ACTIVATIONS = {"gelu": F.gelu, "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh")}


def norm(x, w, eps):
    """Gemma's RMSNorm: x / rms(x) times (1 + weight)."""
    return (1.0 + w) * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))


def resolved(cfg):
    """What the forward needs from either config.json form: per layer its window (None = global) and rotary
    (theta, linear factor). A file with both forms of a rotary must say the same in each."""
    n, gemma3 = cfg["num_hidden_layers"], cfg["model_type"] == "gemma3_text"
    pattern = cfg.get("sliding_window_pattern", 6) if gemma3 else 2
    types = cfg.get("layer_types") or ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n)]
    theta, scaling = cfg.get("rope_theta", 1e6 if gemma3 else 1e4), cfg.get("rope_scaling")
    local = cfg.get("rope_local_base_freq", 1e4)
    rp = cfg.get("rope_parameters")
    if rp is not None:  # v5: gemma3's keyed by layer type, gemma2's one rotary
        full = dict(rp["full_attention"] if "full_attention" in rp else rp)
        v5_theta = full.pop("rope_theta")
        v5_local = rp["sliding_attention"]["rope_theta"] if "sliding_attention" in rp else local
        v5_scaling = None if full.get("rope_type", "default") == "default" else full
        assert rp.get("sliding_attention", {}).get("rope_type", "default") == "default"
        for key, a, b in (("rope_theta", "rope_theta" in cfg and theta, v5_theta),
                          ("rope_local_base_freq", "rope_local_base_freq" in cfg and local, v5_local),
                          ("rope_scaling", cfg.get("rope_scaling"), v5_scaling)):
            if a not in (None, False) and a != b:
                raise AssertionError("%s %r disagrees with rope_parameters %r" % (key, a, b))
        theta, local, scaling = v5_theta, v5_local, v5_scaling
    factor = scaling["factor"] if scaling else 1.0
    assert not scaling or scaling["rope_type"] == "linear"
    layers = []
    for t in types:
        sliding = t == "sliding_attention"
        rotary = (local, 1.0) if (gemma3 and sliding) else (theta, factor)
        layers.append((cfg["sliding_window"] if sliding else None, rotary))
    return layers


def cos_sin(T, D, theta, factor):
    inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D)) / factor
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()


def cap(x, c):
    return x if not c else c * torch.tanh(x / c)


def attention(cfg, W, p, h, window, rotary, pad):
    g = lambda n: W[n].double()  # noqa: E731
    B, T, _ = h.shape
    H, KV, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    bias = cfg.get("attention_bias", False)
    lin = lambda x, n: x @ g(p + n + ".weight").T + (g(p + n + ".bias") if bias else 0.0)  # noqa: E731
    q = lin(h, "self_attn.q_proj").reshape(B, T, H, D)
    k = lin(h, "self_attn.k_proj").reshape(B, T, KV, D)
    v = lin(h, "self_attn.v_proj").reshape(B, T, KV, D).transpose(1, 2)
    if cfg["model_type"] == "gemma3_text":  # per head, before rotary
        q = norm(q, g(p + "self_attn.q_norm.weight"), cfg["rms_norm_eps"])
        k = norm(k, g(p + "self_attn.k_norm.weight"), cfg["rms_norm_eps"])
    cos, sin = cos_sin(T, D, *rotary)
    rope = lambda t: t * cos + torch.cat([-t[..., D // 2:], t[..., :D // 2]], -1) * sin  # noqa: E731
    q, k = rope(q.transpose(1, 2)), rope(k.transpose(1, 2))
    k = torch.stack([k[:, j // (H // KV)] for j in range(H)], 1)  # query head j reads kv head j // (H / KV)
    v = torch.stack([v[:, j // (H // KV)] for j in range(H)], 1)
    scores = cap(q @ k.transpose(-1, -2) * cfg["query_pre_attn_scalar"] ** -0.5, cfg.get("attn_logit_softcapping"))
    qi, kj = torch.arange(T)[:, None], torch.arange(T)[None, :]
    hidden = kj > qi
    if window is not None:
        hidden = hidden | (kj <= qi - window)
    probs = torch.softmax(scores.masked_fill(hidden, NEG) + pad, -1)
    return lin((probs @ v).transpose(1, 2).reshape(B, T, H * D), "self_attn.o_proj")


def forward(cfg, W, ids, mask):
    g = lambda n: W[n].double()  # noqa: E731
    eps = cfg["rms_norm_eps"]
    act = ACTIVATIONS[cfg.get("hidden_activation") or "gelu_pytorch_tanh"]
    pad = (1.0 - mask.double())[:, None, None, :] * NEG
    x = g("model.embed_tokens.weight")[ids] * math.sqrt(cfg["hidden_size"])
    for i, (window, rotary) in enumerate(resolved(cfg)):
        p = "model.layers.%d." % i
        y = attention(cfg, W, p, norm(x, g(p + "input_layernorm.weight"), eps), window, rotary, pad)
        x = x + norm(y, g(p + "post_attention_layernorm.weight"), eps)
        h = norm(x, g(p + "pre_feedforward_layernorm.weight"), eps)
        m = (act(h @ g(p + "mlp.gate_proj.weight").T) * (h @ g(p + "mlp.up_proj.weight").T)) @ g(p + "mlp.down_proj.weight").T
        x = x + norm(m, g(p + "post_feedforward_layernorm.weight"), eps)
    x = norm(x, g("model.norm.weight"), eps)
    head = g("model.embed_tokens.weight") if cfg.get("tie_word_embeddings", True) else g("lm_head.weight")
    return cap(x @ head.T, cfg.get("final_logit_softcapping"))


def weights(gen, cfg):
    C, V, I = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    H, KV, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    bias = cfg.get("attention_bias", False)
    W = {"model.embed_tokens.weight": rand(gen, V, C, std=0.5)}
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        W[p + "input_layernorm.weight"] = rand(gen, C, std=0.1)
        for n, rows in (("q", H * D), ("k", KV * D), ("v", KV * D)):
            W[p + "self_attn.%s_proj.weight" % n] = rand(gen, rows, C)
            if bias:
                W[p + "self_attn.%s_proj.bias" % n] = rand(gen, rows, std=0.2)
        W[p + "self_attn.o_proj.weight"] = rand(gen, C, H * D)
        if bias:
            W[p + "self_attn.o_proj.bias"] = rand(gen, C, std=0.2)
        if cfg["model_type"] == "gemma3_text":
            W[p + "self_attn.q_norm.weight"] = rand(gen, D, std=0.1)
            W[p + "self_attn.k_norm.weight"] = rand(gen, D, std=0.1)
        for n in ("post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"):
            W[p + n + ".weight"] = rand(gen, C, std=0.1)
        W[p + "mlp.gate_proj.weight"] = rand(gen, I, C)
        W[p + "mlp.up_proj.weight"] = rand(gen, I, C)
        W[p + "mlp.down_proj.weight"] = rand(gen, C, I)
    W["model.norm.weight"] = rand(gen, C, std=0.1)
    if not cfg.get("tie_word_embeddings", True):
        W["lm_head.weight"] = rand(gen, V, C)
    return W


def config(model_type, arch, **extra):
    cfg = {"model_type": model_type, "architectures": [arch], "vocab_size": 43, "hidden_size": 32,
           "intermediate_size": 48, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
           "head_dim": 12, "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 32,
           "initializer_range": 0.02, "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "attention_dropout": 0.0,
           "attention_bias": False, "query_pre_attn_scalar": 20, "sliding_window": 4, "pad_token_id": 0,
           "bos_token_id": 2, "eos_token_id": 1, "use_cache": True, "cache_implementation": "hybrid",
           "torch_dtype": "float32", "transformers_version": "4.50.0"}
    cfg.update(extra)
    return cfg


GEMMA2 = dict(rope_theta=10000.0, final_logit_softcapping=2.0, attn_logit_softcapping=1.0)
GEMMA3 = dict(rope_theta=10000.0, rope_local_base_freq=100.0, sliding_window_pattern=2,
              rope_scaling={"rope_type": "linear", "factor": 8.0}, final_logit_softcapping=None,
              attn_logit_softcapping=None)
V5_ROPE = {"full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0},
           "sliding_attention": {"rope_type": "default", "rope_theta": 50.0}}
CASES = [
    # name, config, shards, {what must bind: the config change that must alter the logits}
    ("gemma2_caps_window", config("gemma2", "Gemma2ForCausalLM", hidden_act="gelu_pytorch_tanh",
                                  sliding_window_size=4, **GEMMA2), 1,
     {"window": {"sliding_window": 100}, "attention cap": {"attn_logit_softcapping": None},
      "final cap": {"final_logit_softcapping": None}, "query_pre_attn_scalar": {"query_pre_attn_scalar": 12}}),
    ("gemma2_untied_bias_types", config("gemma2", "Gemma2ForCausalLM", num_hidden_layers=2, head_dim=6,
                                        hidden_activation="gelu", attention_bias=True, tie_word_embeddings=False,
                                        layer_types=["full_attention", "sliding_attention"], sliding_window=3,
                                        final_logit_softcapping=None, attn_logit_softcapping=5.0,
                                        rope_theta=10000.0), 2,
     {"window": {"sliding_window": 100}}),
    ("gemma3_local_rope", config("gemma3_text", "Gemma3ForCausalLM", sliding_window=5, **GEMMA3), 1,
     {"window": {"sliding_window": 100}, "local base": {"rope_local_base_freq": 10000.0},
      "linear scaling": {"rope_scaling": None}}),
    ("gemma3_v5_caps", config("gemma3_text", "Gemma3ForCausalLM", num_key_value_heads=1, tie_word_embeddings=False,
                              layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                              rope_parameters=V5_ROPE, final_logit_softcapping=3.0, attn_logit_softcapping=2.0,
                              transformers_version="5.0.0"), 2,
     {"window": {"sliding_window": 100}, "attention cap": {"attn_logit_softcapping": None},
      "local base": {"rope_parameters": dict(V5_ROPE, sliding_attention={"rope_type": "default", "rope_theta": 1e4})}}),
]
T = 12  # longer than every window above


def make_cases(root):
    gen = torch.Generator().manual_seed(1357)
    cases = []
    for name, cfg, shards, binds in CASES:
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
        for what, change in binds.items():
            if (forward(dict(cfg, **change), W, ids, mask) - logits.detach()).abs().max().item() < 1e-3:
                raise AssertionError("%s: the %s does not change the logits" % (name, what))
        d = os.path.join(root, name)
        write_model_dir(os.path.join(d, "model"), cfg, W, shards=shards)
        inputs = {"input_ids": ids, "attention_mask": mask, "labels": labels}
        write_safetensors(os.path.join(d, "inputs.safetensors"), list(inputs.items()))
        cases.append({"name": name, "dir": d, "config": cfg, "weights": W, "inputs": inputs,
                      "logits": logits.detach(), "loss": loss.detach(), "grads": {k: v.grad for k, v in leaves.items()}})
    return cases


def check_case(case, failures):
    name = case["name"]
    got_path = os.path.join(case["dir"], "hftrain_output.safetensors")
    if not os.path.exists(got_path):
        failures.append("%s: hftrain wrote no output" % name)
        return
    got, _ = read_safetensors(got_path)
    real = case["inputs"]["attention_mask"].bool()  # a padded query's logits are no implementation's definition
    worst = compare_outputs(name, got, case, (("logits", got["logits"][real], case["logits"][real]),
                                              ("loss", got["loss"], case["loss"].reshape(1))), failures)
    d = os.path.join(case["dir"], "resaved")  # what hftrain saved: HF names, the same weights and logits here
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    for key in ("model_type", "architectures", "num_key_value_heads", "tie_word_embeddings", "query_pre_attn_scalar",
                "final_logit_softcapping", "attn_logit_softcapping", "sliding_window", "hidden_activation"):
        if cfg.get(key) != case["config"].get(key):
            failures.append("%s: resaved %s %r, original %r" % (name, key, cfg.get(key), case["config"].get(key)))
    W = read_model_dir(d)
    if set(W) != set(case["weights"]) or any(not torch.equal(W[k], case["weights"][k]) for k in W):
        failures.append("%s: resaved tensors differ" % name)
        return
    i = case["inputs"]
    try:
        for form in ("both", "4.x", "v5"):  # either form of the rotary keys alone gives the same model
            c = dict(cfg)
            if form == "4.x":
                c.pop("rope_parameters", None)
            elif form == "v5":
                for key in ("rope_theta", "rope_scaling", "rope_local_base_freq"):
                    c.pop(key, None)
            ok, err = close(forward(c, W, i["input_ids"], i["attention_mask"])[real], case["logits"][real])
            if not ok:
                failures.append("%s: logits from the saved directory (%s rotary keys) differ by %.3g" % (name, form, err))
    except AssertionError as e:
        failures.append("%s: saved config.json: %s" % (name, e))
    print("%-26s loss %.8f vs %.8f, %d gradients, worst rel err %.3g" % (name, got["loss"].item(), case["loss"].item(),
                                                                          len(case["grads"]), worst))


def main():
    return check_all_cases("gemma_reference", "gemma", make_cases, check_case, ENV, TAG)


if __name__ == "__main__":
    sys.exit(main())
