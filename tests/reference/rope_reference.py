#!/usr/bin/env python3
# Reference test for rotary scaling: HF-layout llama directories (random weights) whose config.json carries
# rope_scaling of each rope_type hftrain builds (linear, dynamic, llama3, yarn, longrope; the older `type`
# spelling; v5's rope_parameters), with a small original length (16) and sequences of 48 so that the scaling
# binds (and one of 12 where longrope keeps its short factors). The expected logits come from a float64
# llama forward whose rotary frequencies are written here from the published formulas (linear position
# interpolation; NTK-aware "dynamic" base growth; Llama 3.1's wavelength bands; YaRN, arXiv:2309.00071, its
# ramp over the correction range and its attention temperature 0.1 ln(s) + 1; LongRoPE's per-frequency
# factors and sqrt(1 + ln s / ln L) scale), as transformers' configs parameterise them. hftrain loads each
# directory through model.from_pretrained (the hidden Catch2 case "[hfmodels_ref]") and must agree to 1e-5;
# the directory it saves must carry the same rotary (both rope_scaling and rope_parameters) and give the
# same logits here. Needs only Python 3 and torch. Exit 0 = agreement.
import json
import math
import os
import sys

try:
    import torch
except ImportError:
    sys.exit("rope_reference: this Python (%s) cannot import torch; configure with "
             "-DHFTRAIN_REFERENCE_PYTHON=/path/to/python3" % sys.executable)

from hf_family_cases import llama_case  # noqa: E402
from hf_family_forwards import causal_loss, llama_forward  # noqa: E402
from hf_reference_harness import close, compare_with_hftrain, read_model_dir, write_model_dir  # noqa: E402
from safetensors_io import write_safetensors  # noqa: E402

ORIGINAL = 16  # original_max_position_embeddings of the cases
LONG = 48      # their sequence length


def rope_of(cfg):
    """(theta, scaling dict or None) from a config in either form; both forms present must say the same."""
    v4 = (cfg.get("rope_theta", 10000.0), cfg.get("rope_scaling"))
    if cfg.get("rope_parameters") is None:
        return v4
    rp = dict(cfg["rope_parameters"])
    theta = rp.pop("rope_theta", 10000.0)
    scaling = None if rp.get("rope_type", "default") == "default" and len(rp) <= 1 else rp
    if "rope_scaling" in cfg or "rope_theta" in cfg:
        def canon(s):
            if s is None:
                return None
            s = dict(s)
            s.setdefault("rope_type", s.get("type"))
            s.pop("type", None)
            return s
        if canon(v4[1]) != canon(scaling) or v4[0] != theta:
            raise AssertionError("rope_scaling %r / rope_theta %r disagree with rope_parameters %r"
                                 % (v4[1], v4[0], cfg["rope_parameters"]))
    return theta, scaling


def inv_freq_and_scale(cfg, D, seq_len):
    """Rotary inverse frequencies (float64) and the factor on cos / sin for a sequence of seq_len positions."""
    theta, s = rope_of(cfg)
    i = torch.arange(0, D, 2, dtype=torch.float64)
    base_freq = lambda b: b ** (-i / D)  # noqa: E731  theta^(-2k/D)
    inv = base_freq(theta)
    if s is None:
        return inv, 1.0
    kind = s.get("rope_type", s.get("type"))
    M = cfg["max_position_embeddings"]
    if kind == "linear":  # positions divided by the factor
        return inv / s["factor"], 1.0
    if kind == "dynamic":  # NTK: base * (s L / M - (s - 1))^(D / (D - 2)) once L passes M
        L = max(seq_len, M)
        return base_freq(theta * (s["factor"] * L / M - (s["factor"] - 1)) ** (D / (D - 2))), 1.0
    if kind == "llama3":
        L0, f = s["original_max_position_embeddings"], s["factor"]
        lo, hi = s["low_freq_factor"], s["high_freq_factor"]
        out = []
        for w in inv.tolist():
            wavelength = 2 * math.pi / w
            if wavelength < L0 / hi:  # high frequencies: unchanged
                out.append(w)
            elif wavelength > L0 / lo:  # low frequencies: interpolated by the factor
                out.append(w / f)
            else:  # between: a linear blend in L0 / wavelength
                a = (L0 / wavelength - lo) / (hi - lo)
                out.append((1 - a) * w / f + a * w)
        return torch.tensor(out, dtype=torch.float64), 1.0
    if kind == "yarn":
        L0 = s.get("original_max_position_embeddings", M)
        f = M / L0 if "original_max_position_embeddings" in s else s["factor"]
        # dimension index at which a frequency completes r rotations over L0 positions
        dim_at = lambda r: D * math.log(L0 / (2 * math.pi * r)) / (2 * math.log(theta))  # noqa: E731
        lo = max(math.floor(dim_at(s.get("beta_fast", 32))), 0)
        hi = min(math.ceil(dim_at(s.get("beta_slow", 1))), D - 1)
        if lo == hi:
            hi += 0.001
        gamma = ((torch.arange(D // 2, dtype=torch.float64) - lo) / (hi - lo)).clamp(0, 1)  # 0: keep, 1: interpolate
        scaled = (1 - gamma) * inv + gamma * inv / f
        scale = s.get("attention_factor") or (0.1 * math.log(f) + 1 if f > 1 else 1.0)
        return scaled, scale
    if kind == "longrope":
        L0 = s.get("original_max_position_embeddings", M)
        f = M / L0
        factors = s["long_factor"] if seq_len > L0 else s["short_factor"]
        scale = s.get("attention_factor") or (math.sqrt(1 + math.log(f) / math.log(L0)) if f > 1 else 1.0)
        return inv / torch.tensor(factors, dtype=torch.float64), scale
    raise AssertionError("rope type %r" % kind)


def rope_tables(cfg, T, D):
    inv, scale = inv_freq_and_scale(cfg, D, T)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat([ang, ang], -1)
    return emb.cos() * scale, emb.sin() * scale


def forward(cfg, W, ids, mask):
    return llama_forward(cfg, W, ids, mask, tables=rope_tables)


CASES = [
    ("rope_linear", {"rope_theta": 10000.0, "max_position_embeddings": 64,
                     "rope_scaling": {"type": "linear", "factor": 2.0}}, LONG),
    ("rope_dynamic", {"rope_theta": 10000.0, "max_position_embeddings": ORIGINAL,
                      "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, LONG),
    ("rope_llama3", {"rope_theta": 500000.0, "max_position_embeddings": 64,
                     "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                      "original_max_position_embeddings": ORIGINAL}}, LONG),
    ("rope_llama3_v5", {"max_position_embeddings": 64,
                        "rope_parameters": {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 4.0,
                                            "low_freq_factor": 1.0, "high_freq_factor": 8.0,
                                            "original_max_position_embeddings": ORIGINAL}}, LONG),
    ("rope_yarn", {"rope_theta": 10000.0, "max_position_embeddings": 64,
                   "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": ORIGINAL}}, LONG),
    ("rope_yarn_betas", {"rope_theta": 10000.0, "max_position_embeddings": 64,
                         "rope_scaling": {"rope_type": "yarn", "factor": 3.0, "beta_fast": 16.0, "beta_slow": 2.0}}, LONG),
    ("rope_longrope_long", {"rope_theta": 10000.0, "max_position_embeddings": 64,
                            "rope_scaling": {"rope_type": "longrope", "short_factor": [1.0, 1.1, 1.5, 2.0],
                                             "long_factor": [1.0, 2.0, 4.5, 7.0],
                                             "original_max_position_embeddings": ORIGINAL}}, LONG),
    ("rope_longrope_short", {"rope_theta": 10000.0, "max_position_embeddings": 64,
                             "rope_scaling": {"rope_type": "longrope", "short_factor": [1.0, 1.1, 1.5, 2.0],
                                              "long_factor": [1.0, 2.0, 4.5, 7.0],
                                              "original_max_position_embeddings": ORIGINAL}}, 12),
]


def make_cases(root):
    gen = torch.Generator().manual_seed(4321)
    cases = []
    for name, rope, T in CASES:
        cfg, W = llama_case(gen, tie=False, kv_heads=2, theta=10000.0)
        for k in ("rope_theta", "rope_scaling"):
            cfg.pop(k)
        cfg.update(rope)
        # smaller attention scores: float32's rounding of position x frequency (hftrain's and HF's tables alike)
        # reaches the logits less at position 47 (1.1e-5 unscaled with the shared weights, 5e-6 here)
        for k in list(W):
            if k.endswith(("q_proj.weight", "k_proj.weight")):
                W[k] = W[k] * 0.4
        ids = torch.randint(1, 43, (2, T), generator=gen)
        mask = torch.ones(2, T, dtype=torch.int64)
        mask[1, T - 5:] = 0  # right padding in the second row
        labels = ids.clone()
        labels[1, T - 5:] = -100
        logits = forward(cfg, W, ids, mask)
        # the scaling must bind: the unscaled rotary gives other logits
        unscaled = llama_forward(dict(cfg, rope_theta=rope_of(cfg)[0]), W, ids, mask)
        if (unscaled - logits).abs().max().item() < 0.1:
            raise AssertionError("%s: the rope scaling does not change the logits" % name)
        d = os.path.join(root, name)
        write_model_dir(os.path.join(d, "model"), cfg, W)
        inputs = {"input_ids": ids, "attention_mask": mask, "labels": labels}
        write_safetensors(os.path.join(d, "inputs.safetensors"), list(inputs.items()))
        loss = causal_loss(logits, labels)
        cases.append({"name": name, "dir": d, "config": cfg, "weights": W, "inputs": inputs, "logits": logits,
                      "loss": loss})
    return cases


def check_resaved(case, got, failures):
    """The saved directory: the same rotary in both spellings, the same weights, the same logits here."""
    d = os.path.join(case["dir"], "resaved")
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    name = case["name"]
    try:
        want, have = rope_of(case["config"]), rope_of(cfg)
        canon = lambda s: None if s is None else {k: v for k, v in dict(s, rope_type=s.get("rope_type", s.get("type"))).items() if k != "type"}  # noqa: E731,E501
        if want[0] != have[0] or canon(want[1]) != canon(have[1]):
            failures.append("%s: resaved rotary %r, original %r" % (name, have, want))
        if "rope_scaling" not in cfg or "rope_parameters" not in cfg:
            failures.append("%s: resaved config.json lacks rope_scaling or rope_parameters" % name)
    except AssertionError as e:
        failures.append("%s: resaved: %s" % (name, e))
        return ""
    W = read_model_dir(d)
    if set(W) != set(case["weights"]) or any(not torch.equal(W[k], case["weights"][k]) for k in W):
        failures.append("%s: resaved tensors differ" % name)
        return ""
    i = case["inputs"]
    ok, err = close(forward(cfg, W, i["input_ids"], i["attention_mask"]), case["logits"])
    if not ok:
        failures.append("%s: logits from the saved directory differ by %.3g" % (name, err))
    return ""


def main():
    return compare_with_hftrain("rope", make_cases, "HFTRAIN_HF_REFERENCE_DIR", "[hfmodels_ref]", check_resaved)


if __name__ == "__main__":
    sys.exit(main())
