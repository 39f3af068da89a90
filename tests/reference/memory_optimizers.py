# Reference implementations of hftrain's memory-efficient optimizers, written from the papers (no code
# from bitsandbytes, galore-torch or transformers), for gpt_reference.py (through reference_optimizers.py)
# and quant_reference.py:
#   - block-wise dynamic 8-bit quantisation and 8-bit AdamW: Dettmers et al. 2021, "8-bit Optimizers via
#     Block-wise Quantization" (arXiv:2110.02861), sections 2.1-2.2;
#   - GaLore: Zhao et al. 2024, "GaLore: Memory-Efficient LLM Training by Gradient Low-Rank Projection"
#     (arXiv:2403.03507), Algorithm 2, with AdamW / 8-bit AdamW / Adafactor as the inner optimizer.
# The conventions the papers leave open are hftrain's documented ones (docs/design.md, "Memory-efficient
# optimizers"): the codebook formula, nearest-value rounding with ties to the lower value, decoupled
# weight decay before the update, the projection refreshed at a tensor's steps 1, 1 + gap, ...
import math

import torch


# ---- dynamic (tree) data type ---------------------------------------------------------------------------
def _magnitude(r, bits):
    # r: the code without its sign bit (bits = 7), or the whole unsigned code (bits = 8). The paper's layout:
    # E zero bits (exponent 10^-E), an indicator one bit, then F linear fraction bits. Each exponent level
    # spans (10^-(E+1), 10^-E] in 2^F equal steps, so 1.0 is exact.
    if r == 0:
        return 0.0
    e = 0
    while not (r >> (bits - 1 - e)) & 1:
        e += 1
    f_bits = bits - 1 - e
    f = r & ((1 << f_bits) - 1)
    return (1 + 9 * (f + 1) / 2 ** f_bits) / 10 ** (e + 1)


def codebook(signed):
    vals = []
    for c in range(256):
        if signed:
            m = _magnitude(c & 0x7F, 7)
            vals.append(-m if c & 0x80 else m)
        else:
            vals.append(_magnitude(c, 8))
    return torch.tensor(vals, dtype=torch.float32)


class BlockQuantizer:
    """Block-wise absmax normalisation + nearest value of the dynamic data type."""

    def __init__(self, signed, block_size):
        self.values = codebook(signed)
        self.block = block_size
        order = sorted(range(256), key=lambda c: (self.values[c].item(), c))
        codes = []
        for c in order:  # one code per distinct value (the signed 0x80 repeats 0: code 0 is kept)
            if codes and self.values[codes[-1]].item() == self.values[c].item():
                continue
            codes.append(c)
        self.sorted_codes = torch.tensor(codes, dtype=torch.uint8)
        v = self.values[self.sorted_codes.long()].double()
        self.midpoints = (v[:-1] + v[1:]) / 2

    def _blocks(self, n):
        return (n + self.block - 1) // self.block

    def quantize(self, x):
        flat = x.detach().reshape(-1).to(torch.float32)
        n = flat.numel()
        nb = self._blocks(n)
        padded = torch.zeros(nb * self.block, dtype=torch.float32)
        padded[:n] = flat
        absmax = padded.view(nb, self.block).abs().max(dim=1).values
        scale = absmax.repeat_interleave(self.block)[:n]
        safe = torch.where(scale > 0, scale, torch.ones_like(scale))
        normed = flat / safe
        idx = torch.searchsorted(self.midpoints, normed.double(), right=False)  # ties stay with the lower value
        codes = self.sorted_codes[idx]
        codes = torch.where(scale > 0, codes, torch.zeros_like(codes))
        return codes.view(x.shape), absmax

    def dequantize(self, codes, absmax):
        n = codes.numel()
        scale = absmax.repeat_interleave(self.block)[:n]
        return (self.values[codes.reshape(-1).long()] * scale).view(codes.shape)


# ---- Adam moments, fp32 or 8-bit --------------------------------------------------------------------------
class RefMoments:
    """Adam's m and v of one tensor; 8-bit ones are dequantised, updated in fp32, quantised again (paper 2.1)."""

    def __init__(self, shape, betas, eps, quantized, block_size):
        self.b1, self.b2 = betas
        self.eps = eps
        self.t = 0
        self.q = (BlockQuantizer(True, block_size), BlockQuantizer(False, block_size)) if quantized else None
        zeros = torch.zeros(shape)
        self.m, self.v = (self.q[0].quantize(zeros), self.q[1].quantize(zeros)) if quantized else (zeros, zeros.clone())

    def update(self, g, lr):
        self.t += 1
        m = self.q[0].dequantize(*self.m) if self.q else self.m
        v = self.q[1].dequantize(*self.v) if self.q else self.v
        m.mul_(self.b1).add_(g, alpha=1 - self.b1)
        v.mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
        step_size = lr / (1 - self.b1 ** self.t)
        denom = (v.sqrt() / math.sqrt(1 - self.b2 ** self.t)).add_(self.eps)
        if self.q:
            self.m, self.v = self.q[0].quantize(m), self.q[1].quantize(v)
        return m, denom, step_size


def stepped_params(optimizer):
    """(group, parameter) for each parameter of `optimizer` that has a gradient, group by group."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                yield group, p


class RefAdamW8bit(torch.optim.Optimizer):
    # AdamW (decoupled decay p *= 1 - lr wd first) whose moments are block-wise 8-bit for tensors with at
    # least min_8bit_size elements.
    def __init__(self, params, lr, betas, eps, block_size=2048, min_8bit_size=4096, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        self.block_size, self.min_8bit_size = block_size, min_8bit_size

    @torch.no_grad()
    def step(self):
        for group, p in stepped_params(self):
            st = self.state[p]
            if not st:
                st["moments"] = RefMoments(p.shape, group["betas"], group["eps"],
                                           p.numel() >= self.min_8bit_size, self.block_size)
            p.mul_(1 - group["lr"] * group["weight_decay"])
            m, denom, step_size = st["moments"].update(p.grad, group["lr"])
            p.addcdiv_(m, denom, value=-step_size)


# ---- GaLore ---------------------------------------------------------------------------------------------
class RefProjector:
    # Algorithm 2: every `gap` steps P_t from the SVD of G_t; R_t = P_t^T G_t; back: alpha P_t N_t. "Left"
    # is the paper's P (m x r), "right" its counterpart Q (n x r) for the other side; std takes the smaller
    # side of the matrix (P when m < n), reverse_std the other, full both.
    def __init__(self, shape, rank, gap, scale, proj_type):
        m, n = shape
        self.r = min(rank, m, n)
        self.gap, self.scale, self.t = gap, scale, 0
        tall = m >= n
        self.left = proj_type in ("left", "full") or (proj_type == "std" and not tall) or \
            (proj_type == "reverse_std" and tall)
        self.right = proj_type in ("right", "full") or (proj_type == "std" and tall) or \
            (proj_type == "reverse_std" and not tall)
        self.P = self.Qt = None

    def project(self, g):
        if self.t % self.gap == 0:
            U, S, Vh = torch.linalg.svd(g, full_matrices=False)
            self.P = U[:, :self.r].contiguous()
            self.Qt = Vh[:self.r, :].contiguous()
        self.t += 1
        R = g
        if self.left:
            R = torch.matmul(self.P.t(), R)
        if self.right:
            R = torch.matmul(R, self.Qt.t())
        return R

    def back(self, N):
        if self.left:
            N = torch.matmul(self.P, N)
        if self.right:
            N = torch.matmul(N, self.Qt)
        return N * self.scale


class RefGaLore(torch.optim.Optimizer):
    # GaLore with inner optimizer "adamw", "adamw_8bit" or "adafactor" (adafactor_delta(state, g, p, options,
    # lr) -> (delta, step size) supplies the latter). Groups carry "names"; `targets` are the projected ones.
    def __init__(self, groups, lr, betas, eps, inner, targets, rank=128, update_proj_gap=200, scale=0.25,
                 proj_type="std", block_size=2048, min_8bit_size=4096, adafactor_delta=None, adafactor_options=None):
        super().__init__(groups, dict(lr=lr, betas=betas, eps=eps))
        self.inner, self.targets = inner, set(targets)
        self.proj = dict(rank=rank, gap=update_proj_gap, scale=scale, proj_type=proj_type)
        self.block_size, self.min_8bit_size = block_size, min_8bit_size
        self.adafactor_delta, self.adafactor_options = adafactor_delta, adafactor_options or {}

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, wd = group["lr"], group["weight_decay"]
            for name, p in zip(group["names"], group["params"]):
                if p.grad is None:
                    continue
                st = self.state[p]
                if not st and name in self.targets:
                    st["proj"] = RefProjector(p.shape, **self.proj)
                proj = st.get("proj")
                R = proj.project(p.grad) if proj else p.grad
                if self.inner == "adafactor":
                    st.setdefault("adafactor", {})
                    delta, alpha = self.adafactor_delta(st["adafactor"], R, p, self.adafactor_options, lr)
                    p.copy_(p * (1 - wd * alpha) - (proj.back(delta) if proj else delta))
                    continue
                if "moments" not in st:
                    quantized = self.inner == "adamw_8bit" and R.numel() >= self.min_8bit_size
                    st["moments"] = RefMoments(R.shape, group["betas"], group["eps"], quantized, self.block_size)
                p.mul_(1 - lr * wd)
                m, denom, step_size = st["moments"].update(R, lr)
                if proj:
                    p.add_(proj.back(m / denom), alpha=-step_size)
                else:
                    p.addcdiv_(m, denom, value=-step_size)


# ---- LOMO and AdaLomo ---------------------------------------------------------------------------------------
class RefLomo(torch.optim.Optimizer):
    # LOMO, Lv et al. 2023 (arXiv:2306.09782): SGD without state; the fused backward changes when the update
    # happens, not what it is (each parameter's gradient is complete before its update). Clipping is done by
    # the caller (the paper's first backward pass computes the same global norm). Decoupled decay first.
    def __init__(self, params, lr, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group, p in stepped_params(self):
            if group["weight_decay"]:
                p.mul_(1 - group["lr"] * group["weight_decay"])
            p.add_(p.grad, alpha=-group["lr"])


class RefAdaLomo(torch.optim.Optimizer):
    # AdaLomo, Lv et al. 2024 (arXiv:2310.10195), Algorithm 1: factored second moment (row / column sums of
    # g^2 + eps1, beta2_t = 1 - t^decay_rate), U = g / sqrt(V), grouped update normalisation
    # U / max(1, RMS(U) / clip_threshold), step eta_t = lr max(eps2, RMS(theta_{t-1})), decay (1 - eta_t wd).
    # The Adafactor paper's factored estimate with those choices is adafactor_delta(..., scale_parameter=True).
    def __init__(self, params, lr, adafactor_delta, clip_threshold=1.0, decay_rate=-0.8, eps1=1e-30, eps2=1e-3):
        super().__init__(params, dict(lr=lr))
        self.delta = adafactor_delta
        self.options = dict(clip_threshold=clip_threshold, decay_rate=decay_rate, eps1=eps1, eps2=eps2,
                            scale_parameter=True)

    @torch.no_grad()
    def step(self):
        for group, p in stepped_params(self):
            delta, eta = self.delta(self.state[p], p.grad, p, self.options, group["lr"])
            p.copy_(p * (1 - group["weight_decay"] * eta) - delta)
