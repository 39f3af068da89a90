# The optimizers of gpt_reference.py's loop: Adafactor and Lion written from their papers (no torch
# implementation), GaLore's choice of target modules, and make_optimizer, which builds the one a case names
# (torch.optim for adamw / adam / sgd / adagrad, memory_optimizers.py for the memory-efficient ones).
import math
import re

import torch

import memory_optimizers as mem


def rms(x):
    return x.pow(2).mean().sqrt()


class RefAdafactor(torch.optim.Optimizer):
    # Adafactor, Shazeer & Stern 2018 (arXiv:1804.04235), Algorithms 4 and 5, with the conventions HF
    # documents for transformers.optimization.Adafactor: eps1 is added to g^2 before averaging;
    # beta2_t = 1 - t^decay_rate; the update is divided by max(1, RMS(update) / clip_threshold); the
    # step size is lr, or with relative_step min(1e-2 (1e-6 t with warmup_init), 1/sqrt(t)), times
    # max(eps2, RMS(previous parameter)) with scale_parameter; the optional first moment averages the
    # scaled update; weight decay shrinks the parameter by weight_decay * step size.
    # For a matrix the second moment is the rank-1 estimate V = R C^T / sum(R) from the running row
    # sums R and column sums C of g^2 (the paper's formulation).
    def __init__(self, params, lr, eps1=1e-30, eps2=1e-3, clip_threshold=1.0, decay_rate=-0.8, beta1=None,
                 scale_parameter=False, relative_step=False, warmup_init=False, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, eps1=eps1, eps2=eps2, clip_threshold=clip_threshold,
                                      decay_rate=decay_rate, beta1=beta1, scale_parameter=scale_parameter,
                                      relative_step=relative_step, warmup_init=warmup_init,
                                      weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group, p in mem.stepped_params(self):
            delta, alpha = adafactor_delta(self.state[p], p.grad, p, group, group["lr"])
            p.copy_(p * (1 - group["weight_decay"] * alpha) - delta)


def adafactor_delta(st, g, p, o, lr):
    # One Adafactor step for gradient g (the shape of the state; p is read for scale_parameter): returns the
    # update to subtract and the step size alpha (also galore_adafactor's inner step, on projected gradients).
    get = lambda k, d: o.get(k, d)  # noqa: E731
    if not st:
        st["t"] = 0
        if g.dim() >= 2:
            st["R"] = torch.zeros(g.shape[:-1])
            st["C"] = torch.zeros(g.shape[:-2] + g.shape[-1:])
        else:
            st["V"] = torch.zeros_like(g)
        if get("beta1", None) is not None:
            st["m"] = torch.zeros_like(g)
    st["t"] += 1
    t = st["t"]
    rho = lr
    if get("relative_step", False):
        rho = min(1e-6 * t if get("warmup_init", False) else 1e-2, 1.0 / math.sqrt(t))
    alpha = max(get("eps2", 1e-3), rms(p).item()) * rho if get("scale_parameter", False) else rho
    b2 = 1.0 - t ** get("decay_rate", -0.8)
    g2 = g * g + get("eps1", 1e-30)
    if g.dim() >= 2:
        st["R"] = b2 * st["R"] + (1 - b2) * g2.sum(dim=-1)
        st["C"] = b2 * st["C"] + (1 - b2) * g2.sum(dim=-2)
        V = st["R"].unsqueeze(-1) * st["C"].unsqueeze(-2) / st["R"].sum(dim=-1)[..., None, None]
    else:
        st["V"] = b2 * st["V"] + (1 - b2) * g2
        V = st["V"]
    U = g / V.sqrt()
    U = U / max(1.0, (rms(U) / get("clip_threshold", 1.0)).item())
    delta = alpha * U
    if get("beta1", None) is not None:
        st["m"] = get("beta1", None) * st["m"] + (1 - get("beta1", None)) * delta
        delta = st["m"]
    return delta, alpha


class RefLion(torch.optim.Optimizer):
    # Lion, Chen et al. 2023 (arXiv:2302.06675), Algorithm 2 with decoupled weight decay:
    #   c = beta1 m + (1 - beta1) g;  theta <- theta (1 - lr wd) - lr sign(c);  m <- beta2 m + (1 - beta2) g
    # (the decay is applied as a separate shrink of theta, as the paper's released code does).
    def __init__(self, params, lr, betas, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group, p in mem.stepped_params(self):
            b1, b2 = group["betas"]
            st = self.state[p]
            if not st:
                st["m"] = torch.zeros_like(p)
            g, m = p.grad, st["m"]
            direction = torch.sign(b1 * m + (1 - b1) * g)
            st["m"] = b2 * m + (1 - b2) * g
            p.mul_(1 - group["lr"] * group["weight_decay"])
            p.sub_(group["lr"] * direction)


LINEAR_MODULES = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")


def galore_target(targets, param_name):
    # HF's check_target_module_exists on the module of a Linear weight: one string = re.fullmatch; a list =
    # exact name, substring, or re.match at the start.
    if not param_name.endswith(".weight"):
        return False
    module = param_name[:-len(".weight")]
    if not module.endswith(LINEAR_MODULES):
        return False
    if isinstance(targets, str):
        return re.fullmatch(targets, module) is not None
    return module in targets or any(t in module for t in targets) or any(re.match(t, module) for t in targets)


def make_optimizer(case, groups):
    tr, opt, o = case["training"], case["optimizer"], case["optimizer_options"]
    lr = tr["learning_rate"]
    betas = (tr.get("adam_beta1", 0.9), tr.get("adam_beta2", 0.999))
    eps = tr.get("adam_epsilon", 1e-8)
    if opt == "adamw":
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, foreach=False)
    if opt == "adam":
        return torch.optim.Adam(groups, lr=lr, betas=betas, eps=eps, foreach=False)
    if opt == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=o.get("momentum", 0.0), dampening=o.get("dampening", 0.0),
                               nesterov=o.get("nesterov", False), foreach=False)
    if opt == "adafactor":
        return RefAdafactor(groups, lr=lr, **o)
    if opt == "adagrad":
        return torch.optim.Adagrad(groups, lr=lr, lr_decay=o.get("lr_decay", 0.0),
                                   initial_accumulator_value=o.get("initial_accumulator_value", 0.0),
                                   eps=o.get("eps", 1e-10), foreach=False)
    if opt == "adamw_8bit":
        return mem.RefAdamW8bit(groups, lr=lr, betas=betas, eps=eps, **o)
    if opt == "lomo":
        return mem.RefLomo(groups, lr=lr)
    if opt == "adalomo":
        return mem.RefAdaLomo(groups, lr=lr, adafactor_delta=adafactor_delta, **o)
    if opt.startswith("galore_"):
        targets = [nm for g in groups for nm in g["names"] if galore_target(tr["optim_target_modules"], nm)]
        inner = opt[len("galore_"):].replace("_layerwise", "")
        proj = {k: o[k] for k in ("rank", "update_proj_gap", "scale", "proj_type") if k in o}
        extra = {k: v for k, v in o.items() if k not in proj}
        if inner == "adafactor":
            return mem.RefGaLore(groups, lr, betas, eps, inner, targets, adafactor_delta=adafactor_delta,
                                 adafactor_options=extra, **proj)
        return mem.RefGaLore(groups, lr, betas, eps, inner, targets, **proj, **extra)
    if opt == "lion":  # HF builds Lion with betas (adam_beta1, adam_beta2) unless overridden
        return RefLion(groups, lr=lr, betas=(o.get("beta1", betas[0]), o.get("beta2", betas[1])))
    raise KeyError(opt)
