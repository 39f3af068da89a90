#!/usr/bin/env python3
# Reference test for loading a checkpoint already quantised to 4 bits in bitsandbytes' serialised layout (what
# save_pretrained of a transformers model loaded with BitsAndBytesConfig(load_in_4bit=True) writes). This script
# quantises a small llama's linear layers itself (nf4_reference.py's quantiser, written from QLoRA's paper) and
# writes the model directory the way that save does, the safetensors file written here byte by byte:
#   - config.json carries quantization_config as BitsAndBytesConfig.to_dict() spells it;
#   - each quantised layer's X.weight is the packed codes (uint8 [(n + 1) / 2, 1]), beside it X.weight.absmax
#     (uint8 codes with double quantisation, else float32), X.weight.quant_map (float32 [16]), with double
#     quantisation X.weight.nested_absmax and X.weight.nested_quant_map, and X.weight.quant_state.bitsandbytes__<type>:
#     the UTF-8 bytes of json.dumps({quant_type, blocksize, dtype, shape[, nested_blocksize, nested_dtype,
#     nested_offset]}) (bitsandbytes QuantState.as_dict(packed=True), Linear4bit's state dict);
#   - the head, norms, embeddings and llm_int8_skip_modules stay float32.
# The hidden Catch2 case "[bnb_ref]" loads each directory through model.from_pretrained and writes: logits and loss,
# which must equal (5e-5, TOL_4BIT) the float64 forward over the weights dequantised here; the directory saved again, whose
# tensors and config.json's quantization_config must equal what was written here, byte for byte; with the case's
# PEFT adapter, logits, loss and the adapter's gradients against the float64 LoRA / DoRA of lora_adapters.py, and
# the loss after one SGD step (lr 0.1) against the reference's after the same step. Exit 0 = agreement.
import json
import os
import sys

try:
    import torch
except ImportError:
    sys.exit("bnb_checkpoint_reference: this Python (%s) cannot import torch" % sys.executable)

from hf_family_cases import llama_case, lm_inputs  # noqa: E402
from hf_family_forwards import causal_loss, llama_forward  # noqa: E402
from hf_reference_harness import TOL, close, run_hftrain_side, write_model_dir  # noqa: E402
from lora_adapters import adapter_config, check_reference, expected, grad_errors, make_adapter  # noqa: E402
from nf4_reference import QUANTISED, code_values, dequantize_4bit, dynamic_map, quantize_4bit  # noqa: E402
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402

LR = 0.1
# hftrain computes in float32 through its fused kernels (attention, RMSNorm, SwiGLU): on the FP4 case with DoRA their
# rounding reaches 2.8e-5 of max(1, |reference|) (9e-6 with HFTRAIN_KERNELS=torch), above the plain 1e-5. A wrong
# code or scale moves a weight by at least 1/12 of its block's absmax, thousands of times more.
TOL_4BIT = 5 * TOL


def bnb_config(kind, double_quant, skip):
    """BitsAndBytesConfig(load_in_4bit=True, ...).to_dict(), as config.json holds it."""
    return {"_load_in_4bit": True, "_load_in_8bit": False, "bnb_4bit_compute_dtype": "float32",
            "bnb_4bit_quant_storage": "uint8", "bnb_4bit_quant_type": kind, "bnb_4bit_use_double_quant": double_quant,
            "llm_int8_enable_fp32_cpu_offload": False, "llm_int8_has_fp16_weight": False, "llm_int8_skip_modules": skip,
            "llm_int8_threshold": 6.0, "load_in_4bit": True, "load_in_8bit": False, "quant_method": "bitsandbytes"}


def serialised(name, w, kind, block, double_quant):
    """The file tensors of one 4-bit weight, in Linear4bit's state-dict order, and the dequantised weight."""
    q = quantize_4bit(w, kind, block, double_quant)
    out = [(name, q["packed"]), (name + ".absmax", q["absmax"]), (name + ".quant_map", code_values(kind))]
    state = {"quant_type": kind, "blocksize": block, "dtype": "float32", "shape": list(w.shape)}
    if double_quant:
        out += [(name + ".nested_absmax", q["nested_absmax"]), (name + ".nested_quant_map", dynamic_map())]
        state.update(nested_blocksize=256, nested_dtype="float32", nested_offset=q["offset"].item())
    blob = json.dumps(state).encode("utf-8")
    out.append((name + ".quant_state.bitsandbytes__" + kind, torch.tensor(list(blob), dtype=torch.uint8)))
    return out, dequantize_4bit(q, kind, block, w.numel()).view(w.shape)


def make_cases(root):
    g = torch.Generator().manual_seed(20261213)
    cases = []
    for name, kind, block, dq, skip, shards, acfg in (
            ("llama_nf4_dq", "nf4", 64, True, None, 1, dict(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])),
            ("llama_fp4_b128_skip_down_sharded", "fp4", 128, False, ["down_proj"], 2,
             dict(r=2, lora_alpha=4, use_dora=True, target_modules=["q_proj", "o_proj", "down_proj"]))):
        d = os.path.join(root, name)
        cfg, W = llama_case(g, tie=False, kv_heads=2, theta=10000.0)
        cfg = dict(cfg, quantization_config=bnb_config(kind, dq, skip))
        files, deq, quantised = {}, {}, 0
        for k, t in W.items():
            module = k.split(".")[-2]
            if module in QUANTISED and module not in (skip or []):
                parts, deq[k] = serialised(k, t, kind, block, dq)
                files.update(parts)
                quantised += 1
            else:
                files[k], deq[k] = t, t
        write_model_dir(os.path.join(d, "model"), cfg, files, shards=shards)
        acfg = dict(adapter_config("llama", "CAUSAL_LM", **acfg), base_model_name_or_path=os.path.join(d, "model"))
        T, mods = make_adapter(g, "llama", acfg, W)
        os.makedirs(os.path.join(d, "adapter"))
        with open(os.path.join(d, "adapter", "adapter_config.json"), "w") as f:
            json.dump(acfg, f, indent=2)
        write_safetensors(os.path.join(d, "adapter", "adapter_model.safetensors"), sorted(T.items()), {"format": "pt"})
        ids, mask, labels = lm_inputs(g, cfg["vocab_size"])
        inputs = {"input_ids": ids, "attention_mask": mask, "labels": labels}
        write_safetensors(os.path.join(d, "inputs.safetensors"), list(inputs.items()))
        case = {"name": name, "dir": d, "type": "llama", "config": cfg, "weights": deq, "inputs": inputs,
                "adapter_config": acfg, "adapter": T, "modules": mods, "files": files, "quantised": quantised,
                "parameters": sum(t.numel() for t in W.values())}
        logits = llama_forward(cfg, deq, ids, mask)
        case["base"] = (logits, causal_loss(logits, labels))
        case["expected"] = expected(case)
        check_reference(case)
        stepped = dict(case, adapter={k: v.double() - LR * case["expected"][2][k] for k, v in T.items()})
        case["stepped_loss"] = expected(stepped)[1]
        cases.append(case)
    return cases


def check_resaved(case, failures):
    d = os.path.join(case["dir"], "resaved")
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("quantization_config") != case["config"]["quantization_config"]:
        failures.append("%s: saved quantization_config %r" % (case["name"], cfg.get("quantization_config")))
    got, _ = read_safetensors(os.path.join(d, "model.safetensors"))
    if set(got) != set(case["files"]):
        failures.append("%s: saved tensors differ: extra %s, missing %s" % (
            case["name"], sorted(set(got) - set(case["files"])), sorted(set(case["files"]) - set(got))))
    for k in sorted(set(got) & set(case["files"])):
        a, b = got[k], case["files"][k]
        if a.dtype != b.dtype or list(a.shape) != list(b.shape) or not torch.equal(a, b):
            failures.append("%s: saved %s differs (%s %s, written %s %s)" % (case["name"], k, a.dtype, list(a.shape),
                                                                           b.dtype, list(b.shape)))


def check_case(case, failures):
    path = os.path.join(case["dir"], "hftrain_output.safetensors")
    if not os.path.exists(path):
        failures.append("%s: hftrain wrote no output" % case["name"])
        return
    got, _ = read_safetensors(path)
    name = case["name"]
    logits, loss, grads, _ = case["expected"]
    checks = (("logits", "logits", case["base"][0]), ("loss", "loss", case["base"][1].reshape(1)),
              ("adapted logits", "adapted_logits", logits), ("adapted loss", "adapted_loss", loss.reshape(1)),
              ("loss after an SGD step", "stepped_loss", case["stepped_loss"].reshape(1)))
    worst = 0.0
    for what, key, want in checks:
        if key not in got:
            failures.append("%s: no %s written" % (name, what))
            continue
        ok, err = close(got[key], want, TOL_4BIT)
        worst = max(worst, err)
        if not ok:
            failures.append("%s: %s differ by %.3g" % (name, what, err))
    for key, want in (("quantized_layers", case["quantised"]), ("total_parameters", case["parameters"])):
        if key not in got or got[key].item() != want:
            failures.append("%s: %s %s, expected %d" % (name, key, got.get(key), want))
    got_grads = {k[len("grad."):]: v for k, v in got.items() if k.startswith("grad.")}
    if set(got_grads) != set(grads):
        failures.append("%s: gradients of %s, expected %s" % (name, sorted(got_grads), sorted(grads)))
    for k, e in grad_errors(got_grads, grads).items():
        worst = max(worst, e)
        if e > TOL_4BIT:
            failures.append("%s: gradient of %s differs by %.3g" % (name, k, e))
    check_resaved(case, failures)
    print("%-34s %d layers 4-bit, worst relative error %.3g (logits, losses, gradients)" % (name, case["quantised"], worst))


def main():
    root, cases, r = run_hftrain_side("bnb_checkpoint", make_cases, lambda cs: [c["name"] for c in cs],
                                      "HFTRAIN_BNB_REFERENCE_DIR", "[bnb_ref]", 4000)
    failures = [] if r.returncode == 0 else ["hftrain side failed (exit %d)" % r.returncode]
    for case in cases:
        check_case(case, failures)
    for f in failures[:30]:
        print("  MISMATCH " + f)
    if failures:
        return 1
    print("PASS: %d bitsandbytes 4-bit checkpoints load as written and train" % len(cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
