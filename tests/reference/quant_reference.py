#!/usr/bin/env python3
# Reference test for block-wise 8-bit quantisation: a table of blocks (random data over many magnitudes,
# every codebook value and the float32 neighbours of every rounding midpoint, zero blocks, a single
# non-zero, negative-only data, subnormals, a short last block) is quantised and dequantised here by
# memory_optimizers.BlockQuantizer (written from Dettmers et al. 2021, arXiv:2110.02861) and by hftrain
# (the hidden Catch2 case "[quant_ref]" of hftrain_unit_tests); codes, block absmax and dequantised values
# must agree bit for bit, for the signed and unsigned data types and block sizes 2048, 256 and 64.
# Needs only Python 3 and torch. Exit 0 = agreement.
import argparse
import json
import os
import shutil
import subprocess
import sys

try:
    import torch
    import memory_optimizers as mem
except ImportError:
    sys.exit("quant_reference: this Python (%s) cannot import torch" % sys.executable)

from safetensors_io import read_safetensors, write_safetensors  # noqa: E402


def table(signed, g):
    # Named inputs; each is quantised as a whole (several blocks) with each block size.
    q = mem.BlockQuantizer(signed, 2048)
    vals = q.values[q.sorted_codes.long()]
    mids = q.midpoints.float()  # float32 roundings of the double midpoints: on either side of them
    up = torch.nextafter(mids, torch.full_like(mids, 2.0))
    down = torch.nextafter(mids, torch.full_like(mids, -2.0))
    edges = torch.cat([vals, mids, up, down, torch.tensor([1.0])])  # absmax 1: the values themselves
    cases = {"edges": edges, "edges_scaled": edges * 3.7}
    for k, scale in enumerate([1e-8, 1e-4, 1e-1, 1.0, 1e3]):
        x = torch.randn(5000, generator=g) * scale
        cases["normal_%d" % k] = x.abs() if not signed else x
    heavy = torch.randn(4099, generator=g) ** 5  # heavy-tailed, several magnitudes inside each block
    cases["heavy"] = heavy.abs() if not signed else heavy
    cases["zeros"] = torch.zeros(3000)
    single = torch.zeros(2100)
    single[1234] = 0.25
    cases["single"] = single
    cases["subnormal"] = torch.full((300,), 1e-40) * torch.arange(300).float()
    cases["matrix"] = (torch.rand(48, 70, generator=g) * (2 if signed else 1) - (1 if signed else 0))
    if signed:
        cases["negative"] = -torch.rand(2500, generator=g)
    return cases


def main():
    ap = argparse.ArgumentParser(description="Check hftrain's block-wise 8-bit quantisation bit for bit.")
    ap.add_argument("--tests", required=True, help="the hftrain_unit_tests binary")
    ap.add_argument("--workdir", required=True, help="scratch directory (its quant folder is recreated)")
    args = ap.parse_args()
    work = os.path.join(os.path.abspath(args.workdir), "quant")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    g = torch.Generator().manual_seed(20261123)
    inputs, cases = [], []
    for signed in (True, False):
        for name, x in table(signed, g).items():
            for block in (2048, 256, 64):
                key = "%s_%s_b%d" % ("signed" if signed else "unsigned", name, block)
                inputs.append((key, x.to(torch.float32)))
                cases.append({"name": key, "signed": signed, "block_size": block})
    write_safetensors(os.path.join(work, "inputs.safetensors"), inputs)
    with open(os.path.join(work, "cases.json"), "w") as f:
        json.dump(cases, f)
    env = dict(os.environ, HFTRAIN_QUANT_REFERENCE_DIR=work)
    r = subprocess.run([args.tests, "[quant_ref]"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit("hftrain_unit_tests [quant_ref] failed:\n" + r.stdout[-4000:])
    got, _ = read_safetensors(os.path.join(work, "hftrain_output.safetensors"))
    x_by = dict(inputs)
    failures, codes_checked, distinct = [], 0, set()
    for c in cases:
        q = mem.BlockQuantizer(c["signed"], c["block_size"])
        codes, absmax = q.quantize(x_by[c["name"]])
        deq = q.dequantize(codes, absmax)
        h_codes, h_absmax, h_deq = (got[c["name"] + s] for s in (".codes", ".absmax", ".dequantized"))
        codes_checked += codes.numel()
        distinct.update(codes.flatten().tolist())
        if not torch.equal(codes, h_codes):
            bad = (codes != h_codes).nonzero()[:5].flatten().tolist()
            failures.append("%s: %d codes differ (first at %s)" % (c["name"], int((codes != h_codes).sum()), bad))
        if not torch.equal(absmax.view(torch.int32), h_absmax.view(torch.int32)):
            failures.append("%s: block absmax differs" % c["name"])
        if not torch.equal(deq.view(torch.int32), h_deq.view(torch.int32)):
            failures.append("%s: dequantised values differ" % c["name"])
    print("%d tables, %d codes compared (%d distinct codes used)" % (len(cases), codes_checked, len(distinct)))
    for f in failures[:20]:
        print("  MISMATCH " + f)
    if failures:
        sys.exit("FAIL: %d mismatches against the Python quantiser" % len(failures))
    print("PASS: hftrain's block-wise quantisation matches the reference bit for bit")


if __name__ == "__main__":
    main()
