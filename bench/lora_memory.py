#!/usr/bin/env python3
# LoRA against full fine-tuning of the same llama shape, side by side: peak RSS of `hftrain train` (from
# wait4, the figure /usr/bin/time -v prints as maximum resident set size), the optimizer state each saves in
# its last checkpoint (optimizer.safetensors), and train_tokens_per_second, alternating the two runs.
# Issue 33's goals: optimizer state of the LoRA run < 2 % of full, peak RSS <= 0.5x full at fp32.
#
#   bench/lora_memory.py --hftrain build/hftrain [--repeats 2] [--hidden 1024] [--layers 8] [--batch 8]
#
# With --workers N the LoRA run alone trains on N workers at ZeRO stage 2 (the base whole on every rank) and
# at stage 3 (the base partitioned too; with DeepSpeed's default prefetch and with prefetch off), alternating:
# the largest worker's peak RSS (wait4 of the launcher reports its largest reaped descendant) and the engine's
# frozen_param_bytes for rank 0. These runs set MALLOC_MMAP_THRESHOLD_=1048576, so that memory a worker frees
# goes back to the system and RSS shows what is held (hftrain's own training policy keeps freed memory).
import argparse
import json
import os
import shutil
import tempfile

from eval_memory import run  # runs a command; its peak RSS (MiB) from wait4 and its output

SPEC = """model: {type: llama, hidden_size: %(hidden)d, intermediate_size: %(inter)d, num_hidden_layers: %(layers)d,
        num_attention_heads: %(heads)d, vocab_size: 256, max_position_embeddings: 256}
data: {type: digit_reversal, num_digits: 60, train_size: 64, eval_size: 0}
training: {output_dir: out, max_steps: %(steps)d, per_device_train_batch_size: %(batch)d, learning_rate: 0.0001,
           save_steps: %(steps)d, eval_strategy: "no", logging_steps: 1, do_eval: false}
"""
PEFT = "peft: {r: 8, lora_alpha: 16, target_modules: [q_proj, v_proj]}\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hftrain", required=True)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--workers", type=int, default=0, help="compare LoRA at ZeRO-2 and ZeRO-3 on this many workers")
    args = ap.parse_args()
    hftrain = os.path.abspath(args.hftrain)
    work = tempfile.mkdtemp(prefix="hftrain_lora_memory_")
    try:
        values = {"hidden": args.hidden, "inter": args.hidden * 8 // 3 // 64 * 64, "layers": args.layers,
                  "heads": max(1, args.hidden // 64), "steps": args.steps, "batch": args.batch}
        with open(os.path.join(work, "full.yaml"), "w") as f:
            f.write(SPEC % values)
        with open(os.path.join(work, "lora.yaml"), "w") as f:
            f.write(SPEC % values + PEFT)
        if args.workers:
            return compare_stages(hftrain, work, args, values)
        results = {"full": [], "lora": []}
        for _ in range(args.repeats):
            for name in ("full", "lora"):
                shutil.rmtree(os.path.join(work, "out"), ignore_errors=True)
                peak, out = run([hftrain, "train", name + ".yaml"], work)
                with open(os.path.join(work, "out", "train_results.json")) as f:
                    tokens = json.load(f)["train_tokens_per_second"]
                state = os.path.getsize(os.path.join(work, "out", "checkpoint-%d" % args.steps, "optimizer.safetensors"))
                trainable = [l for l in out.splitlines() if "trainable params" in l or "Number of trainable" in l]
                results[name].append((peak, state, tokens, trainable[-1].strip() if trainable else ""))
        print("llama hidden %d, %d layers, intermediate %d, batch %d x 121 tokens, fp32, %d steps" %
              (values["hidden"], values["layers"], values["inter"], args.batch, args.steps))
        print("| run | peak RSS (MiB) | optimizer state (bytes) | tokens/s | trainable |")
        print("|---|---|---|---|---|")
        for name in ("full", "lora"):
            for peak, state, tokens, trainable in results[name]:
                print("| %s | %.0f | %d | %.1f | %s |" % (name, peak, state, tokens, trainable))
        best = {n: min(r[0] for r in results[n]) for n in results}
        state = {n: results[n][0][1] for n in results}
        speed = {n: max(r[2] for r in results[n]) for n in results}
        print("peak RSS lora / full (best of %d): %.3f (goal <= 0.5)" % (args.repeats, best["lora"] / best["full"]))
        print("optimizer state lora / full: %.4f (goal < 0.02)" % (state["lora"] / state["full"]))
        print("tokens/s lora / full (best of %d): %.3f" % (args.repeats, speed["lora"] / speed["full"]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def compare_stages(hftrain, work, args, values):
    variants = [("2", ["--set", "zero.stage=2"]), ("3", ["--set", "zero.stage=3"]),
                ("3, prefetch off", ["--set", "zero.stage=3", "--set", "zero.stage3_prefetch_bucket_size=0"])]
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="1048576")
    results = {name: [] for name, _ in variants}
    for rep in range(args.repeats):
        for name, sets in (variants if rep % 2 == 0 else variants[::-1]):
            shutil.rmtree(os.path.join(work, "out"), ignore_errors=True)
            peak, out = run([hftrain, "train", "lora.yaml", "--nproc-per-node", str(args.workers),
                             "--set", "training.save_strategy=no"] + sets, work, env)
            report = [l for l in out.splitlines() if l.startswith("engine memory: ")]
            frozen = json.loads(report[-1][len("engine memory: "):])["ranks"][0]["frozen_param_bytes"] if report else -1
            with open(os.path.join(work, "out", "train_results.json")) as f:
                tokens = json.load(f)["train_tokens_per_second"]
            results[name].append((peak, frozen, tokens))
    print("LoRA on llama hidden %d, %d layers, intermediate %d, %d workers, batch %d x 121 tokens per worker, fp32, %d steps" %
          (values["hidden"], values["layers"], values["inter"], args.workers, args.batch, args.steps))
    print("| ZeRO stage | largest worker's peak RSS (MiB) | frozen base bytes on rank 0 | tokens/s |")
    print("|---|---|---|---|")
    for name, _ in variants:
        for peak, frozen, tokens in results[name]:
            print("| %s | %.0f | %d | %.1f |" % (name, peak, frozen, tokens))
    best = {name: min(r[0] for r in results[name]) for name in results}
    for name, _ in variants[1:]:
        print("peak RSS per worker, stage %s / stage 2 (best of %d): %.3f" % (name, args.repeats, best[name] / best["2"]))


if __name__ == "__main__":
    main()
