#!/usr/bin/python3
# The GEMM-bound floor of one nanoGPT shakespeare-char training step (issue #35's roofline): every matrix
# product of the step at its real shape (batch 12 x 64 tokens, 4 layers x 128, 4 heads, vocabulary 65),
# forward and both gradients, timed alone on contiguous operands with 2 threads through torch 1.13, i.e. the
# same OpenBLAS sgemm hftrain calls. A step cannot be faster than the two sums printed; what a measured step
# takes beyond them is elementwise work, layout copies and overhead (bench/RESULTS.md, "Where a nanoGPT step goes").
#
#   /usr/bin/python3 bench/step_roofline.py
import time

import torch
torch.set_num_threads(2)
B, S, C, H, V, L = 12, 64, 128, 4, 65, 4
T = B * S
shapes = []
for _ in range(L):
    shapes += [(T, C, 3 * C), (T, C, C), (T, C, 4 * C), (T, 4 * C, C)]
shapes += [(T, C, V)]
ops = []
for m, k, n in shapes:  # forward y = x W, weight gradient x^T dy, input gradient dy W^T
    x, w, dy = torch.randn(m, k), torch.randn(k, n), torch.randn(m, n)
    ops += [(x, w), (x.t(), dy), (dy, w.t())]
q, p = torch.randn(B * H, S, C // H), torch.rand(B * H, S, S)
att = []
for _ in range(L):  # forward q k^T and p v; backward: dp = dy v^T, dv = p^T dy, dq = ds k, dk = ds^T q
    att += [(q, q.transpose(1, 2)), (p, q), (q, q.transpose(1, 2)), (p.transpose(1, 2), q), (p, q), (p.transpose(1, 2), q)]
def run(pairs, f):
    for a, b in pairs: f(a, b)
for _ in range(20): run(ops, torch.mm); run(att, torch.bmm)
n = 300
t0 = time.perf_counter()
for _ in range(n): run(ops, torch.mm)
t1 = time.perf_counter()
for _ in range(n): run(att, torch.bmm)
t2 = time.perf_counter()
lin = sum(2 * a.shape[0] * a.shape[1] * b.shape[1] for a, b in ops)
bmm = sum(2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2] for a, b in att)
print("linear GEMMs per step: %.1f MFLOP in %.2f ms (%.0f GFLOP/s)" % (lin / 1e6, (t1 - t0) / n * 1e3, lin / ((t1 - t0) / n) / 1e9))
print("attention products per step: %.1f MFLOP in %.2f ms (%.0f GFLOP/s)" % (bmm / 1e6, (t2 - t1) / n * 1e3, bmm / ((t2 - t1) / n) / 1e9))
