#!/usr/bin/env python3
# Reference test for 8-bit weights (load_in_8bit: bitsandbytes' Linear8bitLt; LLM.int8(), Dettmers et al. 2022,
# arXiv:2208.07339). Written here from the paper and bitsandbytes' documented arithmetic:
#   - a weight [out, in]: each row's absmax SCB (float32); codes CB = round(w * (127 / absmax)) in float32, half to
#     even (int8); a row of zeros gets codes 0. The dequantised weight is CB * (SCB / 127) in float32.
#   - the product with threshold t (> 0): the outlier columns are the input's feature columns holding any
#     |x| >= t; each row of x is quantised by its absmax over its values under t (codes round(x * (127 / absmax))
#     in float32, half to even), the outlier columns' codes 0; then y = (codes @ CB^T, exact integers) * absmax_row
#     * SCB / 127^2 + bias + x[:, outliers] @ W[:, outliers]^T over the dequantised weight. t = 0: no outliers.
#   - the input's gradient dY @ W over the dequantised weight (the base is frozen).
# The quantisation follows the float32 arithmetic above (its result is checked against the float64 127 w / absmax
# to half a code); everything after it is float64 here.
# Part 1 (hidden Catch2 case "[int8_ref]"): weight tables (random, a zero row, heavy tails, exact midpoints, 2100
# columns) quantised by hftrain: CB, SCB and the dequantised weight must equal these bit for bit; product cases
# (thresholds 0, 2, 6, every column an outlier; 1 row, a zero row, 3-d input, bias, several tiles of rows, 2100
# columns, bf16): the activations' codes, row absmax and outlier columns bit for bit, the output and the input
# gradient within 1e-5 of max(1, max |reference|) (float32: the rescaling and the outlier product round in
# float32), 2^-6 in bf16 (the output and the outlier product are rounded to bf16's 8 bits).
# Part 2 (hidden case "[int8_llama_ref]"): a llama quantised at load (thresholds 2.5 and 6) with a PEFT LoRA adapter,
# and a llama checkpoint quantised here and written in bitsandbytes' 8-bit layout (X.weight int8, X.SCB, X.weight_format
# uint8 0; config.json's quantization_config as BitsAndBytesConfig(load_in_8bit=True).to_dict()) with one module
# skipped, loaded as it is and saved again (its tensors must equal these byte for byte). Logits, loss and adapter
# gradients against the float64 forward with LLM.int8() products: the activations' codes are a step function of
# float32 activations, so where one lies within float32 noise of a rounding midpoint hftrain may round it the other
# way (one code moves that output by about absmax / 127 of its row); the logits must lie within
# max(TOL, 2% of the distance between this forward and the forward over the dequantised weights without activation
# quantisation), which leaving the activations unquantised or misplacing the outliers exceeds. Exit 0 = agreement.
import json
import os
import sys

try:
    import torch
except ImportError:
    sys.exit("int8_reference: this Python (%s) cannot import torch" % sys.executable)

from hf_family_cases import llama_case, lm_inputs  # noqa: E402
from hf_family_forwards import causal_loss, llama_forward  # noqa: E402
from hf_reference_harness import TOL, run_hftrain_side, write_model_dir  # noqa: E402
from lora_adapters import PREFIX, UnmergedLinear, adapter_config, make_adapter, scaling  # noqa: E402
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402

LLAMA_FRACTION = 0.02
QUANTISED = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def quantize_rows(x32):
    """Codes (float32 holding integers) and each row's absmax of a float32 [rows, cols]."""
    absmax = x32.abs().max(dim=1).values if x32.shape[1] else torch.zeros(x32.shape[0])
    inverse = torch.where(absmax > 0, 127.0 / absmax, torch.zeros_like(absmax))  # float32, as bitsandbytes
    codes = torch.round(x32 * inverse[:, None])
    exact = torch.where(absmax[:, None] > 0, 127.0 * x32.double() / absmax[:, None].double(), torch.zeros_like(x32.double()))
    if ((codes.double() - exact).abs() > 0.5 + 1e-4).any():
        raise AssertionError("the reference's codes are more than half a code from 127 x / absmax")
    return codes, absmax


def dequantized(cb, scb):
    return cb.double() * scb.double()[:, None] / 127.0


def activations(x32, threshold):
    """(codes, row absmax, outlier columns) of the input [rows, in]."""
    v = x32.clone()
    columns = torch.zeros(0, dtype=torch.int64)
    if threshold > 0:
        outliers = v.abs() >= threshold
        columns = outliers.any(dim=0).nonzero().flatten()
        v[outliers] = 0.0
    codes, absmax = quantize_rows(v)
    codes[:, columns] = 0.0
    return codes, absmax, columns


def int8_product(x32, cb, scb, threshold, bias=None):
    """LLM.int8()'s y [rows, out] in float64 for a float32 input [rows, in]."""
    codes, absmax, columns = activations(x32, threshold)
    ints = codes.long() @ cb.long().T  # exact
    y = ints.double() * absmax.double()[:, None] * scb.double()[None, :] / 127.0 ** 2
    if bias is not None:
        y = y + bias.double()
    return y + x32.double()[:, columns] @ dequantized(cb, scb)[:, columns].T


# ---- part 1: the tables --------------------------------------------------------------------------------------------
def weight_tables(g):
    zero_row = torch.randn(6, 20, generator=g)
    zero_row[2] = 0.0
    mid = torch.tensor([[127.0, 0.5, 1.5, 2.5, -0.5, -1.5, 126.5, 3.5], [-2.0, 1.0, 0.25, 0.75, -1.0, 0.0, 2.0, 1.5]])
    return {"w_rand": torch.randn(9, 37, generator=g), "w_zero_row": zero_row, "w_heavy": torch.randn(10, 33, generator=g) ** 3,
            "w_mid": mid, "w_big": torch.randn(5, 2100, generator=g) * 0.02}


def product_tables(g):
    x = torch.randn(4, 37, generator=g) * 2
    x[2, 5], x[0, 11], x[3, 30] = 8.0, -7.0, 6.0  # 6.0 itself is an outlier (>=)
    one = torch.randn(1, 37, generator=g)
    one[0, 3] = 9.0
    zero = torch.randn(3, 20, generator=g)
    zero[1] = 0.0
    big = torch.randn(3, 2100, generator=g)
    big[1, 100], big[2, 1500] = 12.0, -6.5
    cases = [("p_t6", "w_rand", x, 6.0, True, "float32", 0), ("p_t0_tiles", "w_rand", x, 0.0, True, "float32", 40),
             ("p_t2_3d", "w_rand", torch.randn(2, 3, 37, generator=g) * 1.5, 2.0, False, "float32", 100),
             ("p_one_row", "w_rand", one, 6.0, True, "float32", 0), ("p_zero_row", "w_zero_row", zero, 6.0, False, "float32", 0),
             ("p_all_outliers", "w_heavy", torch.randn(5, 33, generator=g), 1e-3, True, "float32", 0),
             ("p_big", "w_big", big, 6.0, True, "float32", 2100), ("p_bf16", "w_rand", x.bfloat16().float(), 6.0, True, "bfloat16", 0)]
    out = []
    for name, weight, xin, t, bias, dtype, tile in cases:
        rows_out = weight_tables_shapes[weight][0]
        out.append({"name": name, "weight": weight, "x": xin, "threshold": t, "dtype": dtype, "tile": tile,
                    "bias": torch.randn(rows_out, generator=g) if bias else None,
                    "dy": torch.randn(*xin.shape[:-1], rows_out, generator=g)})
    return out


weight_tables_shapes = {}


def close_to(got, want, tol):
    err = (got.double() - want).abs().max().item() if want.numel() else 0.0
    return err <= tol * max(1.0, want.abs().max().item() if want.numel() else 0.0), err


def check_tables(got, weights, products, failures):
    for name, w in weights.items():
        cb, scb = quantize_rows(w)
        want = {"CB": cb.to(torch.int8), "SCB": scb, "dequantized": (cb * (scb / 127.0)[:, None])}
        if (want["dequantized"].double() - dequantized(cb, scb)).abs().max() > 1e-6 * scb.max():
            failures.append("%s: the float32 dequantisation is not the float64 one" % name)
        for key, t in want.items():
            h = got.get(name + "." + key)
            if h is None or h.dtype != t.dtype or not torch.equal(h.reshape(t.shape), t):
                failures.append("%s.%s: differs (or missing)" % (name, key))
    for c in products:
        name, w = c["name"], weights[c["weight"]]
        cb, scb = quantize_rows(w)
        x2 = c["x"].reshape(-1, w.shape[1])
        codes, absmax, columns = activations(x2, c["threshold"])
        for key, t in (("codes", codes.to(torch.int8)), ("row_absmax", absmax), ("outlier_columns", columns)):
            h = got.get(name + "." + key)
            if h is None or h.dtype != t.dtype or not torch.equal(h.reshape(-1), t.reshape(-1)):
                failures.append("%s.%s: differs (or missing)" % (name, key))
        y = int8_product(x2, cb, scb, c["threshold"], c["bias"])
        dx = c["dy"].reshape(-1, w.shape[0]).double() @ dequantized(cb, scb)
        tol = 2.0 ** -6 if c["dtype"] == "bfloat16" else TOL
        for key, want in (("y", y), ("dx", dx)):
            h = got.get(name + "." + key)
            ok, err = close_to(h.reshape(want.shape), want, tol) if h is not None and h.numel() == want.numel() else (False, None)
            if not ok:
                failures.append("%s.%s: differs by %s" % (name, key, err))
        print("%-16s outliers %-3d y err %.3g" % (name, columns.numel(), close_to(got[name + ".y"].reshape(y.shape), y, tol)[1]))


# ---- part 2: llamas ------------------------------------------------------------------------------------------------
class Int8Ref:
    """A quantised weight inside llama_forward (which applies a weight as `h @ w.T`): the value of LLM.int8()'s
    product, the gradient of the product over the dequantised weight."""

    def __init__(self, cb, scb, threshold):
        self.cb, self.scb, self.threshold, self.w = cb, scb, threshold, dequantized(cb, scb)

    def double(self):
        return self

    @property
    def T(self):
        return self

    def t(self):
        return self

    def __rmatmul__(self, h):
        h2 = h.reshape(-1, h.shape[-1])
        linear = h2 @ self.w.T
        value = int8_product(h2.detach().float(), self.cb, self.scb, self.threshold)
        return (linear + (value - linear.detach())).reshape(*h.shape[:-1], -1)


def quantised_names(W, skip):
    return [k for k in W if k.endswith(".weight") and k.split(".")[-2] in QUANTISED and k.split(".")[-2] not in skip]


def llama_outputs(case, int8):
    """(logits, loss, adapter gradients) of the float64 forward: LLM.int8() products, or (int8 False) products over
    the dequantised weights."""
    leaves = {k: v.double().requires_grad_(True) for k, v in case["adapter"].items()}
    E = {k: v.double() for k, v in case["weights"].items()}
    for k in quantised_names(E, case["skip"]):
        cb, scb = quantize_rows(case["weights"][k].float())
        E[k] = Int8Ref(cb, scb, case["threshold"]) if int8 else dequantized(cb, scb)
    for name, r, alpha in case["modules"]:
        A, B = leaves[PREFIX + name + ".lora_A.weight"], leaves[PREFIX + name + ".lora_B.weight"]
        E[name + ".weight"] = UnmergedLinear(E[name + ".weight"], A, B, scaling(case["adapter_config"], r, alpha, ()), False, None)
    ids, mask, labels = (case["inputs"][k] for k in ("input_ids", "attention_mask", "labels"))
    logits = llama_forward(case["config"], E, ids, mask)
    loss = causal_loss(logits, labels)
    loss.backward()
    return logits.detach(), loss.detach(), {k: v.grad for k, v in leaves.items()}


def bnb_8bit_config(threshold, skip):
    """BitsAndBytesConfig(load_in_8bit=True, ...).to_dict(), as config.json holds it."""
    return {"_load_in_4bit": False, "_load_in_8bit": True, "bnb_4bit_compute_dtype": "float32", "bnb_4bit_quant_storage": "uint8",
            "bnb_4bit_quant_type": "fp4", "bnb_4bit_use_double_quant": False, "llm_int8_enable_fp32_cpu_offload": False,
            "llm_int8_has_fp16_weight": False, "llm_int8_skip_modules": skip, "llm_int8_threshold": threshold,
            "load_in_4bit": False, "load_in_8bit": True, "quant_method": "bitsandbytes"}


def serialised_8bit(W, skip):
    """The file tensors in Linear8bitLt's state-dict order: X.weight (int8), X.SCB, X.weight_format (uint8 0)."""
    out = {}
    quantised = set(quantised_names(W, skip))
    for k, t in W.items():
        if k not in quantised:
            out[k] = t
            continue
        cb, scb = quantize_rows(t.float())
        module = k[:-len(".weight")]
        out[k], out[module + ".SCB"], out[module + ".weight_format"] = cb.to(torch.int8), scb, torch.tensor(0, dtype=torch.uint8)
    return out


def llama_cases(root, g):
    out = []
    for name, threshold, prequantized, skip in (("llama_t2.5_lora", 2.5, False, []), ("llama_t6_lora", 6.0, False, []),
                                                ("bnb_8bit_checkpoint", 2.5, True, ["down_proj"])):
        d = os.path.join(root, name)
        cfg, W = llama_case(g, tie=False, kv_heads=2, theta=10000.0)
        acfg = dict(adapter_config("llama", "CAUSAL_LM", r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"]),
                    base_model_name_or_path=os.path.join(d, "model"))
        T, mods = make_adapter(g, "llama", acfg, W)
        ids, mask, labels = lm_inputs(g, 43)
        inputs = {"input_ids": ids, "attention_mask": mask, "labels": labels}
        if prequantized:
            written = serialised_8bit(W, skip)
            write_model_dir(os.path.join(d, "model"), dict(cfg, quantization_config=bnb_8bit_config(threshold, skip)), written)
        else:
            written = None
            write_model_dir(os.path.join(d, "model"), cfg, W)
        os.makedirs(os.path.join(d, "adapter"))
        with open(os.path.join(d, "adapter", "adapter_config.json"), "w") as f:
            json.dump(acfg, f, indent=2)
        write_safetensors(os.path.join(d, "adapter", "adapter_model.safetensors"), sorted(T.items()), {"format": "pt"})
        write_safetensors(os.path.join(d, "inputs.safetensors"), list(inputs.items()))
        with open(os.path.join(d, "case.json"), "w") as f:
            json.dump({"prequantized": prequantized, "threshold": threshold}, f)
        case = {"name": name, "dir": d, "config": cfg, "weights": W, "inputs": inputs, "adapter_config": acfg, "adapter": T,
                "modules": mods, "threshold": threshold, "skip": skip, "written": written}
        case["expected"] = llama_outputs(case, True)
        case["plain"] = llama_outputs(case, False)
        out.append(case)
    return out


def check_llama(case, got, failures):
    (logits, loss, grads), (plain_logits, _, plain_grads) = case["expected"], case["plain"]
    name = case["name"]
    distance = (logits - plain_logits).abs().max().item()
    tol = max(TOL * max(1.0, logits.abs().max().item()), LLAMA_FRACTION * distance)
    err = (got["logits"].double() - logits).abs().max().item() if "logits" in got else None
    if err is None or err > tol:
        failures.append("%s: logits differ by %s (tolerance %.3g)" % (name, err, tol))
    if "loss" not in got or abs(got["loss"].item() - loss.item()) > tol:
        failures.append("%s: loss %s, expected %.8g" % (name, got.get("loss"), loss.item()))
    worst = 0.0
    for k, want in grads.items():
        h = got.get("grad." + k)
        gap = (want - plain_grads[k]).abs().max().item()
        e = (h.double() - want).abs().max().item() if h is not None else float("inf")
        worst = max(worst, e)
        if e > max(TOL * max(1.0, want.abs().max().item()), LLAMA_FRACTION * gap):
            failures.append("%s: gradient of %s differs by %.3g (activation quantisation moves it by %.3g)" % (name, k, e, gap))
    if case["written"] is not None:
        resaved, _ = read_safetensors(os.path.join(case["dir"], "resaved", "model.safetensors"))
        if set(resaved) != set(case["written"]):
            failures.append("%s: saved again with tensors %s" % (name, sorted(set(resaved) ^ set(case["written"]))))
        for k, t in case["written"].items():
            if k in resaved and (resaved[k].dtype != t.dtype or list(resaved[k].shape) != list(t.shape) or not torch.equal(resaved[k], t)):
                failures.append("%s: %s saved again differs" % (name, k))
    print("%-22s logits err %.3g (activation quantisation moves them by %.3g), worst gradient err %.3g" % (name, err or -1, distance, worst))


def main():
    g = torch.Generator().manual_seed(20261208)
    state = {}

    def build(root):
        weights = weight_tables(g)
        weight_tables_shapes.update({k: list(v.shape) for k, v in weights.items()})
        products = product_tables(g)
        tensors = list(weights.items())
        for c in products:
            tensors += [(c["name"] + ".x", c["x"]), (c["name"] + ".dy", c["dy"])]
            if c["bias"] is not None:
                tensors.append((c["name"] + ".bias", c["bias"]))
        write_safetensors(os.path.join(root, "inputs.safetensors"), tensors)
        with open(os.path.join(root, "tables.json"), "w") as f:
            json.dump({"weights": sorted(weights), "products": [{k: c[k] for k in ("name", "weight", "threshold", "dtype", "tile")}
                                                                for c in products]}, f)
        state["weights"], state["products"], state["llamas"] = weights, products, llama_cases(root, g)
        return state["llamas"]

    root, _, r = run_hftrain_side("int8", build, lambda cases: [c["name"] for c in cases], "HFTRAIN_INT8_REFERENCE_DIR",
                                  "[int8_ref],[int8_llama_ref]", 4000)
    failures = [] if r.returncode == 0 else ["hftrain side failed (exit %d)" % r.returncode]
    path = os.path.join(root, "hftrain_tables.safetensors")
    if os.path.exists(path):
        check_tables(read_safetensors(path)[0], state["weights"], state["products"], failures)
    else:
        failures.append("hftrain wrote no tables")
    for case in state["llamas"]:
        path = os.path.join(case["dir"], "hftrain_output.safetensors")
        if not os.path.exists(path):
            failures.append("%s: hftrain wrote no output" % case["name"])
            continue
        check_llama(case, read_safetensors(path)[0], failures)
    print("%d weight tables, %d products, %d llamas" % (len(state["weights"]), len(state["products"]), len(state["llamas"])))
    for f in failures[:30]:
        print("  MISMATCH " + f)
    if failures:
        return 1
    print("PASS: 8-bit quantisation and LLM.int8() agree with the reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
