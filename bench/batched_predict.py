#!/usr/bin/env python3
# `hftrain predict` one example at a time (per_device_eval_batch_size 1) against batched generation
# (per_device_eval_batch_size 16), greedy, for two gpt2 and two t5 shapes trained briefly on the built-in
# digit-reversal tasks (n_positions 64 leaves room for the 13-token prompt and 32 new tokens; with the
# context taken from the data, 26, generation would slide its window and rerun the context each step):
# examples/s of each, alternating runs so that the ratio is measured side by side, and whether
# predictions.jsonl is identical. Goal of issue #34: >= 5x at batch 16 with identical output.
#
#   bench/batched_predict.py --hftrain build/hftrain [--examples 128] [--repeats 2]
import argparse
import json
import os
import shutil
import tempfile

from eval_memory import run

SPECS = {
    "gpt2": """model: {type: gpt2, n_layer: 4, n_head: 4, n_embd: 256, n_positions: 64}
data: {type: digit_reversal, num_digits: 12, train_size: 256, eval_size: 16, test_size: %(examples)d}
generation: {max_new_tokens: 32}
training: {output_dir: out, max_steps: 20, per_device_train_batch_size: 16, learning_rate: 0.001, save_strategy: "no",
           do_eval: false}
""",
    "gpt2-6x512": """model: {type: gpt2, n_layer: 6, n_head: 8, n_embd: 512, n_positions: 64}
data: {type: digit_reversal, num_digits: 12, train_size: 256, eval_size: 16, test_size: %(examples)d}
generation: {max_new_tokens: 32}
training: {output_dir: out, max_steps: 20, per_device_train_batch_size: 16, learning_rate: 0.001, save_strategy: "no",
           do_eval: false}
""",
    "t5": """model: {type: t5, d_model: 256, d_kv: 32, d_ff: 1024, num_layers: 3, num_heads: 8}
data: {type: digit_reversal_seq2seq, num_digits: 12, train_size: 256, eval_size: 16, test_size: %(examples)d}
generation: {max_new_tokens: 32}
training: {output_dir: out, max_steps: 20, per_device_train_batch_size: 16, learning_rate: 0.001, save_strategy: "no",
           do_eval: false}
""",
    "t5-6x512": """model: {type: t5, d_model: 512, d_kv: 64, d_ff: 2048, num_layers: 6, num_heads: 8}
data: {type: digit_reversal_seq2seq, num_digits: 12, train_size: 256, eval_size: 16, test_size: %(examples)d}
generation: {max_new_tokens: 32}
training: {output_dir: out, max_steps: 20, per_device_train_batch_size: 16, learning_rate: 0.001, save_strategy: "no",
           do_eval: false}
""",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hftrain", required=True)
    ap.add_argument("--examples", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    hftrain = os.path.abspath(args.hftrain)
    print("| model | batch | examples/s (per repeat) | test_gen_tokens_per_second (best) |")
    print("|---|---|---|---|")
    summary = []
    for name, spec in SPECS.items():
        work = tempfile.mkdtemp(prefix="hftrain_batched_predict_")
        try:
            with open(os.path.join(work, "spec.yaml"), "w") as f:
                f.write(spec % {"examples": args.examples})
            run([hftrain, "train", "spec.yaml"], work)
            speed, tokens, outputs = {1: [], 16: []}, {1: [], 16: []}, {}
            for rep in range(args.repeats):
                for batch in ([1, 16] if rep % 2 == 0 else [16, 1]):
                    target = "pred-%d" % batch
                    run([hftrain, "predict", "out", "--set", "training.per_device_eval_batch_size=%d" % batch,
                         "--set", "training.output_dir=" + target], work)
                    with open(os.path.join(work, target, "test_results.json")) as f:
                        results = json.load(f)
                    speed[batch].append(results["test_samples_per_second"])
                    tokens[batch].append(results.get("test_gen_tokens_per_second", 0.0))
                    with open(os.path.join(work, target, "predictions.jsonl")) as f:
                        outputs[batch] = f.read()
            for batch in (1, 16):
                print("| %s | %d | %s | %.1f |" % (name, batch, ", ".join("%.2f" % s for s in speed[batch]),
                                                  max(tokens[batch])))
            summary.append("%s: examples/s batch 16 / batch 1 (best of %d) %.2f; predictions.jsonl identical: %s" %
                           (name, args.repeats, max(speed[16]) / max(speed[1]), outputs[1] == outputs[16]))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print("\n".join(summary))


if __name__ == "__main__":
    main()
