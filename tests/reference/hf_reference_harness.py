# What the HF-family reference scripts share: the tolerance and its comparison (close), random weights
# (rand), HF-layout model directories written and read here (config.json + model.safetensors, or shards
# with model.safetensors.index.json; the format itself is safetensors_io.py's), and the driver that runs a
# hidden Catch2 case of hftrain_unit_tests over a script's cases and compares what it wrote.
import argparse
import json
import os
import shutil
import subprocess

import torch

from safetensors_io import read_safetensors, write_safetensors

TOL = 1e-5  # |hftrain - reference| <= TOL * max(1, |reference|)


def close(a, b, tol=TOL):
    err = ((a.double() - b.double()).abs() / b.double().abs().clamp(min=1.0)).max().item()
    return err <= tol, err


def rand(gen, *shape, std=0.3, mean=0.0):
    return (torch.randn(*shape, generator=gen) * std + mean).to(torch.float32)


# ---- model directories ----------------------------------------------------------------------------
def write_model_dir(d, config, tensors, shards=1):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    items = list(tensors.items())
    if shards == 1:
        write_safetensors(os.path.join(d, "model.safetensors"), items, {"format": "pt"})
        return
    per = (len(items) + shards - 1) // shards
    weight_map, total = {}, 0
    for i in range(shards):
        name = "model-%05d-of-%05d.safetensors" % (i + 1, shards)
        part = items[i * per:(i + 1) * per]
        write_safetensors(os.path.join(d, name), part, {"format": "pt"})
        for k, t in part:
            weight_map[k] = name
            total += t.numel() * 4
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def read_model_dir(d):
    """HF-style loading of a directory: model.safetensors or the index's shards."""
    single = os.path.join(d, "model.safetensors")
    if os.path.exists(single):
        tensors, meta = read_safetensors(single)
        if meta != {"format": "pt"}:
            raise AssertionError("%s: metadata %r, expected {'format': 'pt'}" % (single, meta))
        return tensors
    with open(os.path.join(d, "model.safetensors.index.json")) as f:
        index = json.load(f)
    tensors = {}
    for name in sorted(set(index["weight_map"].values())):
        part, meta = read_safetensors(os.path.join(d, name))
        if meta != {"format": "pt"}:
            raise AssertionError("%s: metadata %r" % (name, meta))
        tensors.update(part)
    if set(tensors) != set(index["weight_map"]):
        raise AssertionError("%s: index and shards disagree" % d)
    total = sum(t.numel() * 4 for t in tensors.values())
    if index["metadata"]["total_size"] != total:
        raise AssertionError("%s: total_size %d, expected %d" % (d, index["metadata"]["total_size"], total))
    return tensors


# ---- the hftrain side and the comparison ---------------------------------------------------------
def run_hftrain_side(subdir, build_cases, describe, env_var, tag, tail_chars):
    """The reference scripts' shared driver: parses --tests / --workdir, builds the cases in a fresh
    <workdir>/<subdir>, writes describe(cases) to cases.json there, runs the unit-test binary's `tag`
    with `env_var` naming the directory, prints the end of its output. Returns (root, cases, result)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--tests", required=True, help="the hftrain_unit_tests binary")
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    root = os.path.abspath(os.path.join(args.workdir, subdir))
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    cases = build_cases(root)
    with open(os.path.join(root, "cases.json"), "w") as f:
        json.dump(describe(cases), f, indent=1)
    env = dict(os.environ, **{env_var: root})
    r = subprocess.run([args.tests, tag], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    print(r.stdout[-tail_chars:])
    return root, cases, r


def compare_outputs(name, got, case, checks, failures):
    """Each (what, hftrain's, the reference's) of `checks`, then every parameter gradient hftrain wrote
    (got["grad.<name>"]) against case["grads"], both sets of names equal; failures appended. Returns the worst
    gradient error."""
    for what, have, want in checks:
        ok, err = close(have, want)
        if not ok:
            failures.append("%s: %s differ by %.3g" % (name, what, err))
    grads = {k[len("grad."):]: v for k, v in got.items() if k.startswith("grad.")}
    if set(grads) != set(case["grads"]):
        failures.append("%s: gradients of %s, expected %s" % (name, sorted(grads), sorted(case["grads"])))
    worst = 0.0
    for k in set(grads) & set(case["grads"]):
        ok, err = close(grads[k], case["grads"][k])
        worst = max(worst, err)
        if not ok:
            failures.append("%s: gradient of %s differs by %.3g" % (name, k, err))
    return worst


def check_all_cases(label, subdir, make_cases, check_case, env_var, tag):
    """The driver of the decoder-family scripts: runs the hftrain side over the named cases, then
    check_case(case, failures) for each; prints the failures or "<label>: N cases agree". Returns the exit code."""
    root, cases, r = run_hftrain_side(subdir, make_cases, lambda cases: [c["name"] for c in cases], env_var, tag, 4000)
    failures = [] if r.returncode == 0 else ["hftrain side failed (exit %d)" % r.returncode]
    for case in cases:
        check_case(case, failures)
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("%s: %d cases agree" % (label, len(cases)))
    return 0


def compare_with_hftrain(name, make_cases, env_var, tag, family_checks):
    """Runs the hftrain side over the cases and checks each case's logits and loss against the reference;
    family_checks(case, got, failures) adds a family's own checks and returns text for the case's line.
    Returns the exit code."""
    root, cases, r = run_hftrain_side(name, make_cases, lambda cases: [c["name"] for c in cases], env_var, tag, 6000)
    failures = []
    if r.returncode != 0:
        failures.append("hftrain side failed (exit %d)" % r.returncode)
    for case in cases:
        got_path = os.path.join(case["dir"], "hftrain_output.safetensors")
        if not os.path.exists(got_path):
            failures.append("%s: hftrain wrote no output" % case["name"])
            continue
        got, _ = read_safetensors(got_path)
        ok, err = close(got["logits"], case["logits"])
        ok_loss, err_loss = close(got["loss"], case["loss"].reshape(1))
        if not ok:
            failures.append("%s: logits differ by %.3g" % (case["name"], err))
        if not ok_loss:
            failures.append("%s: loss differs by %.3g" % (case["name"], err_loss))
        more = family_checks(case, got, failures)
        print("%-28s logits max rel err %.3g, loss %.8f vs %.8f%s" % (case["name"], err, got["loss"].item(),
                                                                     case["loss"].item(), more))
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("%s_reference: %d cases agree" % (name, len(cases)))
    return 0
