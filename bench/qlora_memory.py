#!/usr/bin/env python3
# QLoRA against bf16 LoRA and full fine-tuning of the same llama shape, side by side (issue 63): peak RSS of
# `hftrain train` over the whole run and over its training steps alone (VmRSS sampled every 20 ms; the steps
# from the first step's log line on), the parameter bytes `hftrain estimate --json` counts, and
# train_tokens_per_second; the runs alternate. All train with precision.bf16; QLoRA is NF4 with double
# quantisation, bf16 compute (qlora), or LLM.int8() 8-bit (qlora8; products in bf16 under autocast). MALLOC_MMAP_THRESHOLD_ is set so that memory a run frees leaves the process.
# The peak is sampled rather than taken from wait4: hftrain's memory tracker resets the kernel's high-water mark
# (clear_refs) when training starts, so wait4's ru_maxrss reports the peak since then and misses construction.
#
#   bench/qlora_memory.py --hftrain build/hftrain [--repeats 2] [--hidden 1024] [--layers 8] [--batch 2]
#                         [--runs full,lora,qlora,qlora8]
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

SPEC = """model: {type: llama, hidden_size: %(hidden)d, intermediate_size: %(inter)d, num_hidden_layers: %(layers)d,
        num_attention_heads: %(heads)d, vocab_size: 256, max_position_embeddings: 256%(quant)s}
data: {type: digit_reversal, num_digits: 60, train_size: 64, eval_size: 0}
precision: {bf16: true}
training: {output_dir: out, max_steps: %(steps)d, per_device_train_batch_size: %(batch)d, learning_rate: 0.0001,
           save_strategy: "no", eval_strategy: "no", logging_steps: 1, do_eval: false}
"""
QUANT = (",\n        quantization_config: {load_in_4bit: true, bnb_4bit_quant_type: nf4, bnb_4bit_use_double_quant: true,"
         " bnb_4bit_compute_dtype: bfloat16}")
QUANT8 = ",\n        quantization_config: {load_in_8bit: true}"
PEFT = "peft: {r: 8, lora_alpha: 16, target_modules: [q_proj, v_proj]}\n"


def rss_mib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def run(cmd, cwd, env):
    """(peak RSS of the run, peak RSS from its first step's log line on, output), sampled."""
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env)
    lines, stepping = [], threading.Event()

    def read():
        for line in p.stdout:
            lines.append(line)
            if line.startswith("step ") and "| loss " in line:  # the trainer's line after each step
                stepping.set()
    reader = threading.Thread(target=read)
    reader.start()
    peak = steps_peak = 0.0
    while True:
        pid, status, _ = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        rss = rss_mib(p.pid)
        peak = max(peak, rss)
        if stepping.is_set():
            steps_peak = max(steps_peak, rss)
        time.sleep(0.02)
    reader.join()
    out = "".join(lines)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("%s failed:\n%s" % (" ".join(cmd), out[-3000:]))
    return peak, steps_peak, out


def base_bytes(hftrain, work, name):
    out = subprocess.run([hftrain, "estimate", name + ".yaml", "--json"], cwd=work, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, universal_newlines=True, check=True).stdout
    e = json.loads(out[out.find("{"):])
    row = [r for r in e["rows"] if r["stage"] == 0 and r["precision"] == "bf16"][0]
    return row["params"], e


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hftrain", required=True)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--runs", default="full,lora,qlora,qlora8", help="which of full, lora, qlora, qlora8, comma-separated")
    args = ap.parse_args()
    hftrain = os.path.abspath(args.hftrain)
    work = tempfile.mkdtemp(prefix="hftrain_qlora_memory_")
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="1048576")
    names = tuple(args.runs.split(","))
    quant = {"qlora": QUANT, "qlora8": QUANT8}
    try:
        values = {"hidden": args.hidden, "inter": args.hidden * 8 // 3 // 64 * 64, "layers": args.layers,
                  "heads": max(1, args.hidden // 64), "steps": args.steps, "batch": args.batch, "quant": ""}
        for name in names:
            with open(os.path.join(work, name + ".yaml"), "w") as f:
                f.write(SPEC % dict(values, quant=quant.get(name, "")) + ("" if name == "full" else PEFT))
        params = {name: base_bytes(hftrain, work, name) for name in names}
        results = {name: [] for name in names}
        for rep in range(args.repeats):
            for name in (names if rep % 2 == 0 else names[::-1]):
                shutil.rmtree(os.path.join(work, "out"), ignore_errors=True)
                peak, steps_peak, _ = run([hftrain, "train", name + ".yaml"], work, env)
                with open(os.path.join(work, "out", "train_results.json")) as f:
                    tokens = json.load(f)["train_tokens_per_second"]
                results[name].append((peak, steps_peak, tokens))
        whole = " (%d parameters)" % params["full"][1]["parameters"] if "full" in params else ""
        print("llama hidden %d, %d layers, intermediate %d%s, batch %d x 121 tokens, bf16, %d steps" %
              (values["hidden"], values["layers"], values["inter"], whole, args.batch, args.steps))
        print("| run | peak RSS (MiB) | peak RSS in the steps (MiB) | parameter bytes (estimate) | tokens/s |")
        print("|---|---|---|---|---|")
        for name in names:
            for peak, steps_peak, tokens in results[name]:
                print("| %s | %.0f | %.0f | %d | %.1f |" % (name, peak, steps_peak, params[name][0], tokens))
        best = {n: min(r[1] for r in results[n]) for n in names}
        for name in names:
            if name not in quant:
                continue
            q = params[name][1]
            print("%s base: %d weights in %d bytes (%.3f bytes a weight; bf16: 2)" %
                  (name, q["quantized_parameters"], q["quantized_bytes"], q["quantized_bytes"] / q["quantized_parameters"]))
            for other in ("lora", "full"):
                if other in best:
                    print("peak RSS in the steps, %s / %s: %.3f" % (name, other, best[name] / best[other]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
