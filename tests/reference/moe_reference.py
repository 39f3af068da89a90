#!/usr/bin/env python3
# Reference test for hftrain's mixture-of-experts families (mixtral, qwen2_moe, qwen3_moe): HF-layout directories
# (config.json + safetensors, the hub's per-expert tensors and transformers v5's fused ones) with random weights
# are made here; an independent float64 forward written here from the published architecture gives the logits,
# the loss (with HF's load-balancing loss when output_router_logits) and the gradient of the loss for every
# parameter. hftrain loads each directory through model.from_pretrained (the hidden Catch2 case "[moe_ref]")
# and must agree to 1e-5; the directory it saves (always the per-expert layout) must load here with the same
# logits. The architecture, as published:
#   Mixtral: mistral's layer (every layer slides over `sliding_window` keys) whose MLP is block_sparse_moe: router
#     logits = gate(x); p = softmax(logits); the top num_experts_per_tok experts by p, their p renormalised to sum
#     to 1; y = sum over them of p_e * w2(silu(w1 x) * w3 x).
#   Qwen2-MoE: qwen2's layer (q/k/v biases with qkv_bias) whose MLP in MoE layers (not in mlp_only_layers, (i + 1)
#     divisible by decoder_sparse_step) is the routed block over experts.E.{gate,up,down}_proj, renormalised only
#     with norm_topk_prob, plus sigmoid(shared_expert_gate(x)) * shared_expert(x); other layers the dense MLP.
#   Qwen3-MoE: qwen3's layer (per-head q / k RMSNorms) with the routed block, no shared expert.
#   Load balancing (Switch Transformer, eq. 4, as transformers' load_balancing_loss_func): over every MoE layer's
#     tokens that are not padding, num_experts * sum over top-k slots k and experts e of (share of tokens whose
#     k-th choice is e) * (mean router probability of e); the loss adds router_aux_loss_coef times it.
#   transformers v5 fused layout: <block>.experts.gate_up_proj [E, 2I, H] (each expert's gate rows, then up) and
#     <block>.experts.down_proj [E, H, I]; Mixtral's block is then called `mlp` (mlp.gate for the router).
#   Expert counts: each expert's share of the top-k slots over every MoE layer's tokens that are not padding, as
#     hftrain reports expert_fraction_<e>.
# A 1-expert top-1 Mixtral is checked here to equal the dense llama forward of hf_family_forwards.py.
# Needs only Python 3 and torch. Exit 0 = agreement.
import json
import math
import os
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit("moe_reference: this Python (%s) cannot import torch; configure with "
             "-DHFTRAIN_REFERENCE_PYTHON=/path/to/python3" % sys.executable)

from hf_family_forwards import NEG, causal_loss, llama_forward, rms_norm  # noqa: E402
from hf_reference_harness import (check_all_cases, compare_outputs, close, rand, read_model_dir,  # noqa: E402
                                  write_model_dir)
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402

ENV, TAG = "HFTRAIN_MOE_REFERENCE_DIR", "[moe_ref]"
EXPERT_NAMES = {"mixtral": ("w1", "w3", "w2"), "qwen2_moe": ("gate_proj", "up_proj", "down_proj"),
                "qwen3_moe": ("gate_proj", "up_proj", "down_proj")}


def block_name(cfg):
    return "block_sparse_moe" if cfg["model_type"] == "mixtral" else "mlp"


def n_experts(cfg):
    return cfg["num_local_experts"] if cfg["model_type"] == "mixtral" else cfg["num_experts"]


def expert_size(cfg):
    return cfg["intermediate_size"] if cfg["model_type"] == "mixtral" else cfg["moe_intermediate_size"]


def routed_layer(cfg, i):
    if cfg["model_type"] == "mixtral":
        return True
    return i not in (cfg.get("mlp_only_layers") or []) and (i + 1) % cfg["decoder_sparse_step"] == 0


def window(cfg):
    if cfg["model_type"] == "mixtral":
        return cfg.get("sliding_window")
    return None  # the Qwen cases here leave use_sliding_window false


def swiglu(x, g, p, names):
    gate, up, down = names
    a = x @ g(p + gate + ".weight").T
    return (F.silu(a) * (x @ g(p + up + ".weight").T)) @ g(p + down + ".weight").T


def moe_block(cfg, g, p, x, router_logits):
    """x [N, C] -> [N, C]: every expert on every token, weighted by the (renormalised) top-k probability, 0
    for the experts a token did not choose."""
    E, k = n_experts(cfg), cfg["num_experts_per_tok"]
    logits = x @ g(p + "gate.weight").T
    router_logits.append(logits)
    probs = torch.softmax(logits, -1)
    top, chosen = probs.topk(k, -1)
    if cfg["model_type"] == "mixtral" or cfg.get("norm_topk_prob", False):
        top = top / top.sum(-1, keepdim=True)
    weight = torch.zeros_like(probs).scatter(1, chosen, top)
    y = sum(weight[:, e:e + 1] * swiglu(x, g, p + "experts.%d." % e, EXPERT_NAMES[cfg["model_type"]]) for e in range(E))
    if cfg["model_type"] == "qwen2_moe":
        shared = swiglu(x, g, p + "shared_expert.", ("gate_proj", "up_proj", "down_proj"))
        y = y + torch.sigmoid(x @ g(p + "shared_expert_gate.weight").T) * shared
    return y


def load_balancing(cfg, router_logits, mask):
    E, k = n_experts(cfg), cfg["num_experts_per_tok"]
    probs = torch.softmax(torch.cat(router_logits, 0), -1)
    chosen = probs.topk(k, -1)[1]
    m = mask.reshape(-1).double().repeat(len(router_logits))
    share = (F.one_hot(chosen, E).double() * m[:, None, None]).sum(0) / m.sum()  # [k, E]
    mean_prob = (probs * m[:, None]).sum(0) / m.sum()
    return E * (share * mean_prob[None, :]).sum()


def expert_fractions(cfg, router_logits, mask):
    """Each expert's share of the top-k slots over every MoE layer's tokens that are not padding."""
    E, k = n_experts(cfg), cfg["num_experts_per_tok"]
    m = mask.reshape(-1).bool()
    slots = torch.zeros(E, dtype=torch.float64)
    for logits in router_logits:
        for e in torch.topk(logits[m], k, -1)[1].reshape(-1).tolist():
            slots[e] += 1
    return slots / slots.sum()


def forward(cfg, W, ids, mask):
    """Logits and the router logits of every MoE layer."""
    g = lambda n: W[n].double()  # noqa: E731
    B, T = ids.shape
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    D = cfg.get("head_dim") or C // H
    eps, family = cfg["rms_norm_eps"], cfg["model_type"]
    bias = family == "qwen2_moe" and cfg.get("qkv_bias", True)
    inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()

    def rope(t):
        return t * cos + torch.cat([-t[..., D // 2:], t[..., :D // 2]], -1) * sin

    pad = (1.0 - mask.double())[:, None, None, :] * NEG
    qi, kj = torch.arange(T)[:, None], torch.arange(T)[None, :]
    hidden = kj > qi
    if window(cfg) is not None:
        hidden = hidden | (kj <= qi - window(cfg))
    x, router_logits = g("model.embed_tokens.weight")[ids], []
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        h = rms_norm(x, g(p + "input_layernorm.weight"), eps)
        q, k, v = ((h @ g(p + "self_attn.%s_proj.weight" % n).T + (g(p + "self_attn.%s_proj.bias" % n) if bias else 0))
                   for n in "qkv")
        q, k, v = q.reshape(B, T, H, D), k.reshape(B, T, KV, D), v.reshape(B, T, KV, D)
        if family == "qwen3_moe":  # per head, before rotary
            q = rms_norm(q, g(p + "self_attn.q_norm.weight"), eps)
            k = rms_norm(k, g(p + "self_attn.k_norm.weight"), eps)
        q, k, v = rope(q.transpose(1, 2)), rope(k.transpose(1, 2)), v.transpose(1, 2)
        k = torch.stack([k[:, j // (H // KV)] for j in range(H)], 1)
        v = torch.stack([v[:, j // (H // KV)] for j in range(H)], 1)
        scores = (q @ k.transpose(-1, -2) / math.sqrt(D)).masked_fill(hidden, NEG) + pad
        y = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(B, T, H * D)
        x = x + y @ g(p + "self_attn.o_proj.weight").T
        h = rms_norm(x, g(p + "post_attention_layernorm.weight"), eps)
        if routed_layer(cfg, i):
            x = x + moe_block(cfg, g, p + block_name(cfg) + ".", h.reshape(B * T, C), router_logits).reshape(B, T, C)
        else:
            x = x + swiglu(h, g, p + "mlp.", ("gate_proj", "up_proj", "down_proj"))
    x = rms_norm(x, g("model.norm.weight"), eps)
    return x @ g("lm_head.weight").T, router_logits


def weights(gen, cfg):
    C, V = cfg["hidden_size"], cfg["vocab_size"]
    H = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    D = cfg.get("head_dim") or C // H
    E, I, family = n_experts(cfg), expert_size(cfg), cfg["model_type"]
    W = {"model.embed_tokens.weight": rand(gen, V, C, std=0.5)}
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        W[p + "input_layernorm.weight"] = rand(gen, C, std=0.1, mean=1.0)
        for n, rows in (("q", H * D), ("k", KV * D), ("v", KV * D)):
            W[p + "self_attn.%s_proj.weight" % n] = rand(gen, rows, C)
            if family == "qwen2_moe" and cfg.get("qkv_bias", True):
                W[p + "self_attn.%s_proj.bias" % n] = rand(gen, rows, std=0.2)
        W[p + "self_attn.o_proj.weight"] = rand(gen, C, H * D)
        if family == "qwen3_moe":
            W[p + "self_attn.q_norm.weight"] = rand(gen, D, std=0.1, mean=1.0)
            W[p + "self_attn.k_norm.weight"] = rand(gen, D, std=0.1, mean=1.0)
        W[p + "post_attention_layernorm.weight"] = rand(gen, C, std=0.1, mean=1.0)
        b = p + block_name(cfg) + "."
        if not routed_layer(cfg, i):
            inner = cfg["intermediate_size"]
            W[p + "mlp.gate_proj.weight"], W[p + "mlp.up_proj.weight"] = rand(gen, inner, C), rand(gen, inner, C)
            W[p + "mlp.down_proj.weight"] = rand(gen, C, inner)
            continue
        W[b + "gate.weight"] = rand(gen, E, C, std=0.5)
        gate, up, down = EXPERT_NAMES[family]
        for e in range(E):
            W[b + "experts.%d.%s.weight" % (e, gate)] = rand(gen, I, C)
            W[b + "experts.%d.%s.weight" % (e, up)] = rand(gen, I, C)
            W[b + "experts.%d.%s.weight" % (e, down)] = rand(gen, C, I)
        if family == "qwen2_moe":
            S = cfg["shared_expert_intermediate_size"]
            W[b + "shared_expert.gate_proj.weight"], W[b + "shared_expert.up_proj.weight"] = rand(gen, S, C), rand(gen, S, C)
            W[b + "shared_expert.down_proj.weight"] = rand(gen, C, S)
            W[b + "shared_expert_gate.weight"] = rand(gen, 1, C)
    W["model.norm.weight"] = rand(gen, C, std=0.1, mean=1.0)
    W["lm_head.weight"] = rand(gen, V, C)
    return W


def fused(cfg, W):
    """The same weights as transformers v5 stores them: stacked experts (and Mixtral's block called mlp)."""
    out, family = {}, cfg["model_type"]
    gate, up, down = EXPERT_NAMES[family]
    for name, t in W.items():
        if ".experts." not in name:
            out[name.replace(".block_sparse_moe.", ".mlp.")] = t
    for i in range(cfg["num_hidden_layers"]):
        b = "model.layers.%d.%s." % (i, block_name(cfg))
        if b + "gate.weight" not in W:
            continue
        E, v5 = n_experts(cfg), "model.layers.%d.mlp.experts." % i
        out[v5 + "gate_up_proj"] = torch.stack([torch.cat([W[b + "experts.%d.%s.weight" % (e, gate)],
                                                           W[b + "experts.%d.%s.weight" % (e, up)]], 0) for e in range(E)])
        out[v5 + "down_proj"] = torch.stack([W[b + "experts.%d.%s.weight" % (e, down)] for e in range(E)])
    return out


def base_config(model_type, arch, **extra):
    cfg = {"model_type": model_type, "architectures": [arch], "vocab_size": 43, "hidden_size": 32,
           "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "hidden_act": "silu", "max_position_embeddings": 32, "initializer_range": 0.02, "rms_norm_eps": 1e-6,
           "rope_theta": 10000.0, "rope_scaling": None, "tie_word_embeddings": False, "attention_dropout": 0.0,
           "bos_token_id": 1, "eos_token_id": 2, "use_cache": True, "torch_dtype": "float32",
           "transformers_version": "4.51.0", "num_experts_per_tok": 2, "output_router_logits": False,
           "router_aux_loss_coef": 0.001}
    cfg.update(extra)
    return cfg


def mixtral(**extra):
    return base_config("mixtral", "MixtralForCausalLM", **dict({"num_local_experts": 4, "sliding_window": None,
                                                               "router_jitter_noise": 0.0}, **extra))


QWEN = {"use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 28, "num_experts": 4,
        "moe_intermediate_size": 16, "decoder_sparse_step": 1, "norm_topk_prob": False, "mlp_only_layers": []}


def qwen2_moe(**extra):
    return base_config("qwen2_moe", "Qwen2MoeForCausalLM", **dict(QWEN, shared_expert_intermediate_size=20, **extra))


def qwen3_moe(**extra):
    return base_config("qwen3_moe", "Qwen3MoeForCausalLM", **dict(QWEN, head_dim=12, attention_bias=False, **extra))


CASES = [  # name, config, shards, v5 fused layout
    ("mixtral_window", mixtral(sliding_window=5), 1, False),
    ("mixtral_aux_sharded", mixtral(output_router_logits=True, router_aux_loss_coef=0.05, num_local_experts=5), 2, False),
    ("mixtral_v5_fused", mixtral(output_router_logits=True, router_aux_loss_coef=0.02), 1, True),
    ("mixtral_one_expert", mixtral(num_local_experts=1, num_experts_per_tok=1), 1, False),
    ("qwen2_moe_aux", qwen2_moe(output_router_logits=True, router_aux_loss_coef=0.05, mlp_only_layers=[0]), 1, False),
    ("qwen2_moe_step2_norm", qwen2_moe(decoder_sparse_step=2, norm_topk_prob=True, qkv_bias=False), 1, False),
    ("qwen3_moe_aux", qwen3_moe(output_router_logits=True, router_aux_loss_coef=0.05, num_experts=6,
                                num_experts_per_tok=3, norm_topk_prob=True), 1, False),
    ("qwen3_moe_v5_fused", qwen3_moe(), 2, True),
]
T = 12


def check_one_expert_is_llama(cfg, W, ids, mask, logits):
    """A 1-expert top-1 Mixtral is llama with the expert as its MLP."""
    renamed = {k.replace("block_sparse_moe.experts.0.w1", "mlp.gate_proj").replace("block_sparse_moe.experts.0.w3",
               "mlp.up_proj").replace("block_sparse_moe.experts.0.w2", "mlp.down_proj"): v for k, v in W.items()}
    dense = llama_forward(dict(cfg, model_type="llama"), renamed, ids, mask)
    ok, err = close(dense, logits)
    if not ok:
        raise AssertionError("a 1-expert top-1 mixtral differs from llama by %.3g" % err)


def make_cases(root):
    gen = torch.Generator().manual_seed(1357)
    cases = []
    for name, cfg, shards, v5 in CASES:
        W = weights(gen, cfg)
        ids = torch.randint(3, 43, (2, T), generator=gen)
        mask = torch.ones(2, T, dtype=torch.int64)
        mask[1, T - 3:] = 0  # right padding in the second row: out of the loss and of the load balancing
        labels = ids.clone()
        labels[1, T - 3:] = -100
        leaves = {k: v.double().requires_grad_() for k, v in W.items()}
        logits, router_logits = forward(cfg, leaves, ids, mask)
        loss = causal_loss(logits, labels)
        aux = load_balancing(cfg, router_logits, mask)
        fractions = expert_fractions(cfg, [l.detach() for l in router_logits], mask)
        if cfg["output_router_logits"]:
            loss = loss + cfg["router_aux_loss_coef"] * aux
        loss.backward()
        if cfg["model_type"] == "mixtral" and n_experts(cfg) == 1:
            check_one_expert_is_llama(cfg, W, ids, mask, logits.detach())
        d = os.path.join(root, name)
        write_model_dir(os.path.join(d, "model"), cfg, fused(cfg, W) if v5 else W, shards=shards)
        inputs = {"input_ids": ids, "attention_mask": mask, "labels": labels}
        write_safetensors(os.path.join(d, "inputs.safetensors"), list(inputs.items()))
        cases.append({"name": name, "dir": d, "config": cfg, "weights": W, "inputs": inputs, "logits": logits.detach(),
                      "loss": loss.detach(), "aux": aux.detach(), "fractions": fractions, "grads": {k: v.grad for k, v in leaves.items()}})
    return cases


def check_case(case, failures):
    name = case["name"]
    got_path = os.path.join(case["dir"], "hftrain_output.safetensors")
    if not os.path.exists(got_path):
        failures.append("%s: hftrain wrote no output" % name)
        return
    got, _ = read_safetensors(got_path)
    real = case["inputs"]["attention_mask"].bool()
    checks = [("logits", got["logits"][real], case["logits"][real]), ("loss", got["loss"], case["loss"].reshape(1))]
    if case["config"]["output_router_logits"]:
        checks.append(("aux loss", got["aux_loss"], case["aux"].reshape(1)))
    worst = compare_outputs(name, got, case, checks, failures)
    fractions = got.get("expert_fraction")
    if fractions is None or fractions.shape != case["fractions"].shape or \
            (fractions.double() - case["fractions"]).abs().max().item() > 1e-12:
        failures.append("%s: reported expert fractions %s, independently counted %s" % (
            name, None if fractions is None else fractions.tolist(), case["fractions"].tolist()))
    # the directory hftrain saved: the hub's per-expert names, the same weights, the same logits here
    d = os.path.join(case["dir"], "resaved")
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    for key in ("model_type", "architectures", "num_experts_per_tok", "output_router_logits", "num_key_value_heads"):
        if cfg.get(key) != case["config"].get(key):
            failures.append("%s: resaved %s %r, original %r" % (name, key, cfg.get(key), case["config"].get(key)))
    W = read_model_dir(d)
    if set(W) != set(case["weights"]) or any(not torch.equal(W[k], case["weights"][k]) for k in W):
        failures.append("%s: resaved tensors differ" % name)
        return
    i = case["inputs"]
    ok, err = close(forward(cfg, W, i["input_ids"], i["attention_mask"])[0][real], case["logits"][real])
    if not ok:
        failures.append("%s: logits from the saved directory differ by %.3g" % (name, err))
    print("%-22s loss %.8f vs %.8f, %d gradients, worst rel err %.3g" % (name, got["loss"].item(), case["loss"].item(),
                                                                          len(case["grads"]), worst))


def main():
    return check_all_cases("moe_reference", "moe", make_cases, check_case, ENV, TAG)


if __name__ == "__main__":
    sys.exit(main())
