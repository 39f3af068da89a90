#!/usr/bin/env python3
"""hftrain beside HF Trainer and a plain PyTorch loop, in one call (issue 60; docs/gpu.md "The peer benchmark").

  python3 bench/gpu_peer.py --hftrain build-cuda/hftrain --out peer-out [--shapes gpt2-124m,llama-1b] [--steps 40]
          [--batch B] [--device cuda|cpu] [--peak-tflops 989] [--tiny] [--sides hftrain,hf,loop,hftrain-ops]
          [--work DIR] [--launcher direct|torchrun]

For each shape it writes a model directory with random weights that every side starts from (transformers'
AutoModelForCausalLM.from_config under the seed and save_pretrained, else bench/hf_trainer_peer.py's own HF-named
model), a data file of synthetic token rows of exactly `seq` tokens (no padding), then runs, each in its own
process with its log in OUT/<shape>/<side>.log:
  hftrain  `hftrain train` of a spec: model.from_pretrained the directory, data token_files (uint32) on the rows
  hf       HF Trainer (bf16, adamw_torch_fused, attn_implementation sdpa), bench/hf_trainer_peer.py hf
  loop     a plain PyTorch loop (torch.autocast bf16, fused AdamW), bench/hf_trainer_peer.py loop
  hftrain-profile  (by name only) hftrain with `callbacks: [{type: profiler}]` over steps W+2..W+4: PyTorch's
           profiler's Chrome trace and per-operator / per-kernel summary in OUT/<shape>/profile (docs/gpu.md)
  hftrain-ops  hftrain again with HFTRAIN_KERNELS=torch: LibTorch's ops where the fused row kernels (CUDA on a GPU:
           norms, activations, the loss's cross-entropy) would run, so the table shows what those kernels give
with the same rows in the same order (hftrain's first epoch: torch.randperm seeded with the seed), batch, steps,
seed, linear schedule with warmup, max_grad_norm 1.0, weight_decay 0, logging every 10 steps, no eval, no saving
(hftrain still writes its final model, after train_runtime; it is deleted at once). With --launcher torchrun each
side runs as the one worker of PyTorch's torchrun (`python -m torch.distributed.run --standalone`; hftrain as a
binary with --no_python), as users launch them on one GPU.

Measured per side: tokens/s over the steps after the first logged step (the wall-clock times of the log events
at step W and at the last step N: steps W+1..N, so the first W steps, allocator and kernel warm-up, are left
out) and over the whole run (train_runtime); MFU; peak GPU memory; the logged loss at steps W and N.
MFU = F x tokens/s / peak, F = 6 N + 12 x layers x hidden x seq per token (PaLM's appendix B: weights forward
and backward, and attention scores), N = every parameter but the input embeddings (wte, wpe, embed_tokens),
the LM head counted as the V x hidden matmul it is even when tied; peak = --peak-tflops (989: H100 SXM dense bf16).
The torch sides run with the first of --python, this interpreter, /usr/bin/python3 that imports torch (and
transformers, for hf); a side that cannot run is reported as skipped with the reason. Writes OUT/results.json
and OUT/results.md (the table printed at the end).
"""
import argparse
import array
import glob
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
import tensorboard_reader  # noqa: E402  (standard library only)

GPT2_124M = {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12,
             "activation_function": "gelu_new", "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
             "layer_norm_epsilon": 1e-5, "initializer_range": 0.02, "scale_attn_weights": True,
             "tie_word_embeddings": True}
LLAMA_1B = {"vocab_size": 128256, "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
            "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_act": "silu",
            "max_position_embeddings": 2048, "rope_theta": 500000.0, "rms_norm_eps": 1e-5,
            "tie_word_embeddings": True, "initializer_range": 0.02, "attention_bias": False, "mlp_bias": False}
# name -> model_type, config.json fields, sequence, per-device batch (fits an 80 GB GPU on every side), lr
SHAPES = {
    "gpt2-124m": {"model_type": "gpt2", "config": GPT2_124M, "seq": 1024, "batch": 16, "lr": 6e-4},
    "llama-1b": {"model_type": "llama", "config": LLAMA_1B, "seq": 2048, "batch": 4, "lr": 3e-4},
}
TINY = {  # --tiny: the same families, small enough for a CPU smoke test
    "gpt2-124m": {"n_positions": 64, "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 512},
    "llama-1b": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                 "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 64},
}
SIDES = ("hftrain", "hf", "loop", "hftrain-ops")  # in run order: a spent --time-budget cuts the last first
# Asked for by name only: hftrain under its profiler callback (steps W+2..W+4 kept; its tokens/s are not comparable),
# the trace and per-kernel summary copied to OUT/<shape>/profile.
EXTRA_SIDES = ("hftrain-profile",)
HFTRAIN_SIDES = ("hftrain", "hftrain-ops", "hftrain-profile")
PHRASE = 16  # the data: rows of phrases of 16 tokens, each drawn from 256 fixed random phrases


def shape_settings(name, a):
    s = dict(SHAPES[name])
    s["config"] = dict(s["config"])
    if a.tiny:
        s["config"].update(TINY[name])
        s["seq"], s["batch"] = 64, 4
    if a.batch:
        s["batch"] = a.batch
    return s


def model_flops(s):
    """(N, FLOPs per token): N = parameters but the input embeddings, the LM head as its matmul (tied or not)."""
    c, T = s["config"], s["seq"]
    if s["model_type"] == "gpt2":
        d, L = c["n_embd"], c["n_layer"]
        body = L * (12 * d * d + 13 * d) + 2 * d  # attention 4 d^2 + 4 d, MLP 8 d^2 + 5 d, two LayerNorms 4 d
    else:
        d, L, inner = c["hidden_size"], c["num_hidden_layers"], c["intermediate_size"]
        kv = c["num_key_value_heads"] * (d // c["num_attention_heads"])
        body = L * (2 * d * d + 2 * d * kv + 3 * d * inner + 2 * d) + d
    n = body + c["vocab_size"] * d
    return n, 6 * n + 12 * L * d * T


def write_data(path, rows, s, seed):
    """rows x seq little-endian uint32 ids: a stream of phrases, so the loss falls as the model learns them."""
    rng = random.Random(seed)
    k = min(s["config"]["vocab_size"], 4096)
    phrases = [[rng.randrange(k) for _ in range(PHRASE)] for _ in range(256)]
    ids = array.array("I")
    for _ in range(rows * s["seq"] // PHRASE):
        ids.extend(phrases[rng.randrange(len(phrases))])
    if sys.byteorder != "little":
        ids.byteswap()
    with open(path, "wb") as f:
        ids.tofile(f)


def interpreter_with(modules, candidates):
    for py in candidates:
        if py and os.path.exists(py):
            probe = subprocess.run([py, "-c", "import " + ", ".join(modules)], capture_output=True)
            if probe.returncode == 0:
                return py
    return None


RUNNING = {"pgid": None, "deadline": None}  # the side now running (killed with us), the end of --time-budget


def stop_group(pgid, grace=15):
    """SIGTERM first (torchrun then stops its workers, which run in sessions of their own), SIGKILL after `grace` s."""
    try:
        os.killpg(pgid, signal.SIGTERM)
        deadline = time.time() + grace
        # the leader's exit, left to be reaped by its waiter (WNOWAIT)
        while time.time() < deadline and os.waitid(os.P_PID, pgid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            time.sleep(0.2)
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, ChildProcessError):
        pass


def stop_running_side(signum, frame):
    if RUNNING["pgid"]:
        stop_group(RUNNING["pgid"])
    raise SystemExit(128 + signum)


def run_logged(cmd, log_path, timeout, env=None):
    """Runs cmd in its own session, stdout and stderr into log_path; returns (status, wall s, peak RSS bytes)."""
    start = time.time()
    if RUNNING["deadline"] is not None:
        timeout = min(timeout, RUNNING["deadline"] - start)
        if timeout < 5:
            return "skipped: --time-budget spent", 0.0, 0
    with open(log_path, "w") as log:
        log.write("$ %s\n" % " ".join(shlex.quote(c) for c in cmd))
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        RUNNING["pgid"], status = proc.pid, None
        while True:
            pid, code, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(code)
                status = "ok" if proc.returncode == 0 else "failed (exit %d)" % proc.returncode
                break
            if time.time() - start > timeout:
                stop_group(proc.pid)
                _, code, usage = os.wait4(proc.pid, 0)
                proc.returncode = -9
                status = "timed out after %d s" % timeout
                break
            time.sleep(0.2)
    RUNNING["pgid"] = None
    return status, time.time() - start, usage.ru_maxrss * 1024


def side_env():
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1")
    return env


def launched(a, cmd, binary):
    """cmd as it runs: itself, or with --launcher torchrun as torchrun's one worker (torch.distributed.run
    --standalone of the side's own interpreter; for a binary such as hftrain, of the torch sides' one, with
    --no_python)."""
    if a.launcher == "direct":
        return cmd
    python, args = (a.torchrun_python, ["--no_python"] + cmd) if binary else (cmd[0], cmd[1:])
    return [python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1"] + args


def hftrain_spec(a, s, model_dir, data, run_dir):
    model = {"from_pretrained": model_dir} if model_dir else dict(s["config"], type=s["model_type"])
    training = {"output_dir": run_dir, "max_steps": a.steps, "per_device_train_batch_size": s["batch"],
                "learning_rate": s["lr"], "lr_scheduler_type": "linear", "warmup_steps": a.warmup,
                "max_grad_norm": 1.0, "weight_decay": 0.0, "logging_steps": a.logging_steps,
                "save_strategy": "no", "eval_strategy": "no", "do_eval": False, "report_to": ["tensorboard"],
                "seed": a.seed, "optim": "adamw_torch_fused", "disable_tqdm": True,
                "use_cpu": a.device == "cpu"}
    data_section = {"type": "token_files", "train_file": data, "dtype": "uint32",
                    "vocab_size": s["config"]["vocab_size"], "block_size": s["seq"]}
    return {"model": model, "data": data_section, "training": training, "precision": {"bf16": a.precision == "bf16"}}


def hftrain_result(run_dir, log_path):
    """hftrain's own figures: train_results.json, the train/loss events' wall times, the GPU memory keys."""
    r = json.load(open(os.path.join(run_dir, "train_results.json")))
    logs = []
    for path in glob.glob(os.path.join(run_dir, "runs", "*", "events.out.tfevents.*")):
        for e in tensorboard_reader.read_event_file(path)["events"]:
            for v in e.get("values", []):
                if v.get("tag") == "train/loss":
                    logs.append({"step": e["step"], "loss": v["simple_value"], "time": e["wall_time"]})
    state = json.load(open(os.path.join(run_dir, "trainer_state.json")))
    out = {"logs": logs, "train_runtime": r["train_runtime"], "steps": state["global_step"], "peak_gpu_bytes": None}
    keys = ("before_init_mem_gpu", "init_mem_gpu_alloc_delta", "train_mem_gpu_alloc_delta",
            "train_mem_gpu_peaked_delta")
    if all(k in r for k in keys):  # allocated when training starts + the train stage's alloc and peaked deltas
        out["peak_gpu_bytes"] = sum(r[k] for k in keys)
    device = [line.strip() for line in open(log_path, errors="replace") if "Device = " in line]
    out["versions"] = {"device": device[0] if device else "?"}
    return out


def run_hftrain(a, s, model_dir, data, wdir, sdir, side="hftrain"):
    """side "hftrain-ops": the same run with HFTRAIN_KERNELS=torch (LibTorch's ops instead of the fused row kernels);
    "hftrain-profile": with the profiler callback, its files copied to `sdir`/profile."""
    run_dir = os.path.join(wdir, side + "-run")
    shutil.rmtree(run_dir, ignore_errors=True)
    spec = os.path.join(sdir, side + "_spec.json")
    settings = hftrain_spec(a, s, model_dir, data, run_dir)
    if side == "hftrain-profile":
        settings["callbacks"] = [{"type": "profiler", "wait": a.logging_steps, "warmup": 1, "active": 3}]
    with open(spec, "w") as f:
        json.dump(settings, f, indent=1)
    log = os.path.join(sdir, side + ".log")
    env = dict(os.environ, HFTRAIN_KERNELS="torch") if side == "hftrain-ops" else None
    status, wall, rss = run_logged(launched(a, [a.hftrain, "train", spec], binary=True), log, a.side_timeout, env)
    raw = read_result(lambda: hftrain_result(run_dir, log)) if status == "ok" else None
    if status == "ok" and "error" in raw:
        status, raw = "ran, but " + raw["error"], None
    if os.path.isdir(os.path.join(run_dir, "profile")):
        shutil.copytree(os.path.join(run_dir, "profile"), os.path.join(sdir, "profile"), dirs_exist_ok=True)
    for f in glob.glob(os.path.join(run_dir, "*.safetensors")):  # the final model hftrain always saves
        os.remove(f)
    return status, wall, rss, raw


def run_torch_side(side, a, s, py, model_dir, data, wdir, sdir):
    result = os.path.join(sdir, side + "_result.json")
    cmd = [py, os.path.join(HERE, "hf_trainer_peer.py"), side, "--shape", json.dumps(s), "--model", model_dir,
           "--result", result, "--data", data, "--out-dir", os.path.join(wdir, "hf-run"), "--seq", str(s["seq"]),
           "--batch", str(s["batch"]), "--steps", str(a.steps), "--lr", str(s["lr"]), "--warmup", str(a.warmup),
           "--logging-steps", str(a.logging_steps), "--seed", str(a.seed), "--device", a.device,
           "--precision", a.precision]
    status, wall, rss = run_logged(launched(a, cmd, binary=False), os.path.join(sdir, side + ".log"), a.side_timeout,
                                   side_env())
    raw = read_result(lambda: json.load(open(result))) if status == "ok" else None
    if status == "ok" and "error" in raw:
        status, raw = "ran, but " + raw["error"], None
    return status, wall, rss, raw


def read_result(read):
    try:
        return read()
    except (OSError, ValueError, KeyError, tensorboard_reader.Corrupt) as e:
        return {"error": "its results could not be read: %s" % e}


def make_model_dir(a, s, py, model_dir, sdir):
    """The shared weights; returns (model_dir or None, how they were made)."""
    if not py:
        return None, "no interpreter imports torch: hftrain initialises the shape itself, the torch sides are skipped"
    result = os.path.join(sdir, "init_result.json")
    cmd = [py, os.path.join(HERE, "hf_trainer_peer.py"), "init", "--shape", json.dumps(s), "--model", model_dir,
           "--result", result, "--seed", str(a.seed)]
    status, wall, _ = run_logged(cmd, os.path.join(sdir, "init.log"), a.side_timeout, side_env())
    if status != "ok":
        where = "" if status.startswith("skipped") else " (init.log)"
        return None, "writing the weights %s%s: hftrain initialises the shape itself" % (status, where)
    r = json.load(open(result))
    return model_dir, "%s, %d parameters, %.0f s" % (r["weights"], r["parameters"], wall)


def summarise(status, wall, rss, raw, s, a):
    row = {"status": status, "wall_s": round(wall, 1), "peak_rss_bytes": rss}
    if raw is None:
        return row
    tokens = s["batch"] * s["seq"]
    logs = sorted(raw["logs"], key=lambda e: e["step"])
    row.update({"raw": raw, "tokens_per_s_run": raw["steps"] * tokens / raw["train_runtime"],
                "peak_gpu_bytes": raw.get("peak_gpu_bytes")})
    if logs:
        row.update({"first_step": logs[0]["step"], "loss_first": logs[0]["loss"],
                    "last_step": logs[-1]["step"], "loss_last": logs[-1]["loss"]})
    if len(logs) >= 2 and logs[-1]["time"] > logs[0]["time"]:
        row["tokens_per_s"] = (logs[-1]["step"] - logs[0]["step"]) * tokens / (logs[-1]["time"] - logs[0]["time"])
        if a.peak_tflops:
            row["mfu"] = row["tokens_per_s"] * model_flops(s)[1] / (a.peak_tflops * 1e12)
    return row


def run_shape(name, a, pys, work):
    s = shape_settings(name, a)
    sdir, wdir = os.path.join(a.out, name), os.path.join(work, name)
    os.makedirs(sdir, exist_ok=True)
    os.makedirs(wdir, exist_ok=True)
    data, model_dir = os.path.join(wdir, "train.bin"), os.path.join(wdir, "model")
    write_data(data, a.steps * s["batch"], s, a.seed)
    model_dir, weights = make_model_dir(a, s, pys["torch"], model_dir, sdir)
    print("[%s] weights: %s" % (name, weights), flush=True)
    n, fpt = model_flops(s)
    res = {"shape": name, "settings": s, "weights": weights, "N": n, "flops_per_token": fpt, "sides": {}}
    for side in a.sides:
        if side in HFTRAIN_SIDES:
            got = run_hftrain(a, s, model_dir, data, wdir, sdir, side)
        elif side == "hf" and not pys["transformers"]:
            got = ("skipped: transformers not importable (%s)" % ", ".join(pys["tried"]), 0.0, 0, None)
        elif not model_dir:
            got = ("skipped: no shared weights (%s)" % weights, 0.0, 0, None)
        else:
            py = pys["transformers"] if side == "hf" else pys["torch"]
            got = run_torch_side(side, a, s, py, model_dir, data, wdir, sdir)
        res["sides"][side] = summarise(*got, s, a)
        print("[%s] %s: %s (%.0f s)" % (name, side, got[0], got[1]), flush=True)
    return res


def fmt(v, spec, scale=1.0):
    return "n/a" if v is None else spec % (v * scale)


def table(results, a):
    lines = ["| shape | side | status | tokens/s (steps W+1..N) | tokens/s (train_runtime) | MFU | peak GPU GiB | "
             "peak RSS GiB | loss @ W | loss @ N |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for side, row in r["sides"].items():
            steps = "%s / %s" % (row.get("first_step", "-"), row.get("last_step", "-"))
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r["shape"], side, row["status"], fmt(row.get("tokens_per_s"), "%.0f"),
                fmt(row.get("tokens_per_s_run"), "%.0f"), fmt(row.get("mfu"), "%.3f"),
                fmt(row.get("peak_gpu_bytes"), "%.2f", 2.0 ** -30),
                fmt(row["peak_rss_bytes"] or None, "%.2f", 2.0 ** -30),
                fmt(row.get("loss_first"), "%.4f") + (" (W=%s)" % steps.split(" / ")[0] if "first_step" in row else ""),
                fmt(row.get("loss_last"), "%.4f") + (" (N=%s)" % steps.split(" / ")[1] if "last_step" in row else "")))
    return lines


def notes(results, a):
    out = ["", "device %s, %s, %d steps, warmup %d, logging every %d steps, seed %d, %s" % (
        a.device, a.precision, a.steps, a.warmup, a.logging_steps, a.seed,
        "each side run directly" if a.launcher == "direct" else
        "each side as torchrun's one worker (torch.distributed.run --standalone)"),
        "MFU: F = 6 N + 12 x layers x hidden x seq per token over peak %s" % (
            "%g TFLOP/s (--peak-tflops)" % a.peak_tflops if a.peak_tflops else "n/a (no --peak-tflops on the CPU)"),
        "tokens/s (steps W+1..N): batch x seq x (N - W) over the wall-clock time between the log events of steps W "
        "and N; loss: the mean over each logging window, as Trainer logs it",
        "peak GPU: torch.cuda.max_memory_allocated for hf and loop; for hftrain before_init_mem_gpu + "
        "init_mem_gpu_alloc_delta + train_mem_gpu_alloc_delta + train_mem_gpu_peaked_delta (its train_results.json)"]
    for r in results:
        s = r["settings"]
        out.append("%s: batch %d x seq %d, N %.1f M (no input embeddings, LM head counted), F %.3f GFLOP/token; "
                   "weights: %s"
                   % (r["shape"], s["batch"], s["seq"], r["N"] / 1e6, r["flops_per_token"] / 1e9, r["weights"]))
        for side, row in r["sides"].items():
            raw = row.get("raw") or {}
            extra = {k: raw[k] for k in ("attention", "optim", "fused_adamw") if k in raw}
            if raw.get("versions") or extra:
                out.append("  %s: %s" % (side, json.dumps(dict(raw.get("versions", {}), **extra))))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hftrain", required=True)
    ap.add_argument("--out", required=True, help="logs, results.json, results.md")
    ap.add_argument("--work", help="scratch folder for model directories, data and runs (default: a temporary one)")
    ap.add_argument("--shapes", default="gpt2-124m,llama-1b")
    ap.add_argument("--sides", default=",".join(SIDES))
    ap.add_argument("--steps", type=int, help="default 40, --tiny 10")
    ap.add_argument("--batch", type=int, help="per-device batch for every shape (default: per shape)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--precision", choices=["bf16", "fp32"], help="default bf16 on cuda, fp32 on cpu")
    ap.add_argument("--peak-tflops", type=float, help="default 989 (H100 SXM dense bf16) on cuda, none on cpu")
    ap.add_argument("--tiny", action="store_true", help="2 layers x 64, seq 64, batch 4: a smoke test")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--side-timeout", type=int, default=300, help="seconds per side process")
    ap.add_argument("--time-budget", type=int, help="seconds for everything: sides that would run past it are "
                    "cut short or skipped, and the table is still written")
    ap.add_argument("--python", help="interpreter for the torch sides (default: this one, else /usr/bin/python3)")
    ap.add_argument("--launcher", choices=["direct", "torchrun"], default="direct",
                    help="torchrun: every side runs as the one worker of PyTorch's torchrun")
    a = ap.parse_args()
    a.hftrain = os.path.abspath(a.hftrain)
    a.out = os.path.abspath(a.out)
    a.steps = a.steps or (10 if a.tiny else 40)
    a.logging_steps = 2 if a.tiny else 10
    a.warmup = max(1, a.steps // 10)
    a.precision = a.precision or ("bf16" if a.device == "cuda" else "fp32")
    if a.peak_tflops is None and a.device == "cuda":
        a.peak_tflops = 989.0
    a.sides = [x for x in a.sides.split(",") if x]
    names = [x for x in a.shapes.split(",") if x]
    for x in names + a.sides:
        if x not in SHAPES and x not in SIDES + EXTRA_SIDES:
            ap.error("unknown shape or side %r (shapes: %s; sides: %s)" % (x, ", ".join(SHAPES),
                                                                          ", ".join(SIDES + EXTRA_SIDES)))
    tried = [a.python] if a.python else list(dict.fromkeys([sys.executable, "/usr/bin/python3"]))
    pys = {"torch": interpreter_with(["torch"], tried),
           "transformers": interpreter_with(["torch", "transformers"], tried),
           "tried": tried}
    a.torchrun_python = pys["torch"]
    if a.launcher == "torchrun" and not a.torchrun_python:
        ap.error("--launcher torchrun needs an interpreter that imports torch (tried %s)" % ", ".join(tried))
    print("peak for MFU: %s; torch sides: %s; HF Trainer: %s" % (
        "%g TFLOP/s" % a.peak_tflops if a.peak_tflops else "none (cpu)", pys["torch"], pys["transformers"]), flush=True)
    os.makedirs(a.out, exist_ok=True)
    if a.time_budget:
        RUNNING["deadline"] = time.time() + a.time_budget
    signal.signal(signal.SIGTERM, stop_running_side)
    work = a.work or tempfile.mkdtemp(prefix="gpu-peer-")
    results = []
    try:
        for name in names:  # the files are rewritten after each shape, so a run cut short keeps what it measured
            results.append(run_shape(name, a, pys, os.path.abspath(work)))
            text = write_results(results, a, pys)
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    print(text, end="")


def write_results(results, a, pys):
    text = "\n".join(table(results, a) + notes(results, a)) + "\n"
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({"settings": vars(a), "interpreters": pys, "shapes": results}, f, indent=1)
    return text


if __name__ == "__main__":
    main()
