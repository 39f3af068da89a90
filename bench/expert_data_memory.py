#!/usr/bin/env python3
# Expert data parallelism's memory, side by side in one run: `hftrain train` of a mixtral on 2 workers at ZeRO-2 with
# distributed.expert_parallel_size 2 (each rank holds its member's half of the routed experts) and with 1 (every rank
# holds every expert), alternating: each rank's parameter, gradient, master and optimizer bytes from the engine's
# report (`engine memory:`), the peak RSS of the largest process of the job (wait4's, which covers the reaped
# workers), train_tokens_per_second and the final train_loss.
#
#   bench/expert_data_memory.py --hftrain build/hftrain [--repeats 2] [--hidden 512] [--layers 4] [--experts 8]
import argparse
import json
import os
import shutil
import statistics
import tempfile

from eval_memory import run  # runs a command; its peak RSS (MiB) from wait4 and its output

SPEC = """model: {type: mixtral, hidden_size: %(hidden)d, num_hidden_layers: %(layers)d, num_attention_heads: %(heads)d,
        num_key_value_heads: %(kv)d, vocab_size: 256, max_position_embeddings: 256, sliding_window: null,
        intermediate_size: %(inner)d, num_local_experts: %(experts)d, num_experts_per_tok: 2}
data: {type: digit_reversal, num_digits: 60, train_size: 256, eval_size: 0}
training: {output_dir: out, max_steps: %(steps)d, per_device_train_batch_size: %(batch)d, learning_rate: 0.0001,
           save_strategy: "no", logging_steps: 1, do_eval: false, seed: 7}
zero: {stage: 2}
distributed: {intra_op_threads: 1}
"""


def engine_memory(out):
    line = next(l for l in out.splitlines() if "engine memory: " in l)
    return json.loads(line.split("engine memory: ", 1)[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hftrain", required=True)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--inner", type=int, default=704)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch", type=int, default=4)
    args = ap.parse_args()
    hftrain = os.path.abspath(args.hftrain)
    values = {"hidden": args.hidden, "layers": args.layers, "heads": max(1, args.hidden // 64),
              "kv": max(1, args.hidden // 128), "inner": args.inner, "experts": args.experts, "steps": args.steps,
              "batch": args.batch}
    work = tempfile.mkdtemp(prefix="hftrain_expert_data_")
    print("load average before: %.2f %.2f %.2f" % os.getloadavg())
    try:
        with open(os.path.join(work, "spec.yaml"), "w") as f:
            f.write(SPEC % values)
        found = {1: [], 2: []}
        for rep in range(args.repeats):
            for ep in ((2, 1) if rep % 2 == 0 else (1, 2)):
                shutil.rmtree(os.path.join(work, "out"), ignore_errors=True)
                rss, out = run([hftrain, "train", "spec.yaml", "--nproc-per-node", "2", "--set",
                                "distributed.expert_parallel_size=%d" % ep], work)
                with open(os.path.join(work, "out", "train_results.json")) as f:
                    results = json.load(f)
                found[ep].append((rss, results["train_tokens_per_second"], results["train_loss"], engine_memory(out)))
        print("load average after: %.2f %.2f %.2f" % os.getloadavg())
        print("mixtral hidden %(hidden)d, %(layers)d layers, %(experts)d experts x inner %(inner)d top-2; 2 workers, "
              "ZeRO-2, fp32, batch %(batch)d x 121 tokens per worker, %(steps)d steps" % values)
        print("| expert_parallel_size | param MiB / rank | grad | master | optimizer | peak RSS MiB per run | "
              "tokens/s per run | train_loss |")
        print("|---|---|---|---|---|---|---|---|")
        mib = lambda b: b / 2 ** 20
        for ep in (2, 1):
            rank0 = found[ep][0][3]["ranks"][0]
            print("| %d | %.1f | %.1f | %.1f | %.1f | %s | %s | %.4f |" % (
                ep, mib(rank0["param_bytes"]), mib(rank0["grad_bytes"]), mib(rank0["master_bytes"]),
                mib(rank0["optimizer_state_bytes"]), ", ".join("%.0f" % r[0] for r in found[ep]),
                ", ".join("%.1f" % r[1] for r in found[ep]), found[ep][0][2]))
        params = [found[ep][0][3]["ranks"][0]["param_bytes"] for ep in (2, 1)]
        rss = [statistics.median(r[0] for r in found[ep]) for ep in (2, 1)]
        speed = [statistics.median(r[1] for r in found[ep]) for ep in (2, 1)]
        print("parameter bytes per rank EP 2 / EP 1: %.3f; peak RSS (median) EP 2 / EP 1: %.3f; tokens/s EP 2 / EP 1: %.3f"
              % (params[0] / params[1], rss[0] / rss[1], speed[0] / speed[1]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
