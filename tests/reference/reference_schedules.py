# The learning-rate schedules of gpt_reference.py's loop: HF's LambdaLR multipliers written out from their
# formulas, DeepSpeed's WarmupLR / WarmupDecayLR / WarmupCosineLR stepped the way DeepSpeed's engine steps
# them, and make_schedule, which picks the one a case names (torch's ReduceLROnPlateau for the plateau one).
import math

import torch


# HF's LambdaLR multipliers (transformers optimization.py), written out from their formulas.
# W = warmup steps, T = total steps; all share the linear warmup s / max(1, W).
def hf_lambda(name, options, W, T, base_lr):
    def warm(s):
        return s / max(1, W)

    def prog(s):
        return (s - W) / max(1, T - W)

    def cos_wave(cycles, p):  # 1 -> 0 over half a wave per half cycle
        return 0.5 * (1.0 + math.cos(math.pi * cycles * 2.0 * p))

    if name == "constant":
        return lambda s: 1.0
    if name == "constant_with_warmup":
        return lambda s: warm(s) if s < W else 1.0
    if name == "linear":
        return lambda s: warm(s) if s < W else max(0.0, (T - s) / max(1, T - W))
    if name == "cosine":
        cycles = options.get("num_cycles", 0.5)
        return lambda s: warm(s) if s < W else max(0.0, cos_wave(cycles, prog(s)))
    if name == "cosine_with_restarts":
        cycles = options.get("num_cycles", 1)

        def restarts(s):
            if s < W:
                return warm(s)
            if prog(s) >= 1.0:
                return 0.0
            return max(0.0, 0.5 * (1.0 + math.cos(math.pi * ((cycles * prog(s)) % 1.0))))
        return restarts
    if name == "polynomial":
        lr_end, power = options.get("lr_end", 1e-7), options.get("power", 1.0)

        def poly(s):
            if s < W:
                return warm(s)
            if s > T:
                return lr_end / base_lr
            remaining = 1 - (s - W) / (T - W)
            return ((base_lr - lr_end) * remaining ** power + lr_end) / base_lr
        return poly
    if name == "inverse_sqrt":
        tau = options.get("timescale") or W or 10000
        return lambda s: warm(s) if s < W else 1.0 / math.sqrt((s - W + tau) / tau)
    if name == "cosine_with_min_lr":
        cycles = options.get("num_cycles", 0.5)
        rate = options["min_lr_rate"] if "min_lr_rate" in options else options["min_lr"] / base_lr
        return lambda s: warm(s) if s < W else max(0.0, cos_wave(cycles, prog(s)) * (1 - rate) + rate)
    if name == "warmup_stable_decay":
        D = options["num_decay_steps"]
        S = options.get("num_stable_steps", T - W - D)
        floor = options.get("min_lr_ratio", 0.0)
        up, down = options.get("warmup_type", "linear"), options.get("decay_type", "cosine")
        cycles = options.get("num_cycles", 0.5)

        def wsd(s):
            if s < W:
                p = s / max(1, W)
                f = {"linear": p, "cosine": 0.5 * (1.0 - math.cos(math.pi * p)), "1-sqrt": 1.0 - math.sqrt(1.0 - p)}[up]
                return max(0.0, f * (1.0 - floor) + floor)
            if s < W + S:
                return 1.0
            if s < W + S + D:
                p = (s - W - S) / max(1, D)
                f = {"linear": 1.0 - p, "cosine": cos_wave(cycles, p), "1-sqrt": 1.0 - math.sqrt(p)}[down]
                return max(0.0, f * (1.0 - floor) + floor)
            return floor
        return wsd
    raise KeyError(name)


class RefDeepSpeedSchedule:
    # What DeepSpeed's schedulers share: step() after every optimizer step moves last_batch_iteration on
    # by one and writes the new lr into the optimizer (update_lr); get_last_lr() reports it.
    def _set(self, lr):
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        self.last = lr

    def step(self):
        self.it += 1
        self._set(self._lr())

    def get_last_lr(self):
        return [self.last]


class RefDeepSpeedWarmup(RefDeepSpeedSchedule):
    # DeepSpeed's WarmupLR / WarmupDecayLR (deepspeed/runtime/lr_schedules.py) as the engine drives
    # them: constructed at last_batch_iteration -1 with the optimizer at warmup_min_lr, then step()
    # after every optimizer step moves last_batch_iteration on by one and sets the new lr.
    def __init__(self, optimizer, name, options, base_lr, W, T):
        self.optimizer = optimizer
        self.lo = options.get("warmup_min_lr", 0.0)
        self.hi = options.get("warmup_max_lr", base_lr)        # HF fills "auto" with learning_rate
        self.warmup = max(2, options.get("warmup_num_steps", W))
        self.total = options.get("total_num_steps", T) if name == "WarmupDecayLR" else None
        self.log_curve = options.get("warmup_type", "log") == "log"
        self.it = -1
        self._set(self.lo)

    def _gamma(self):
        if self.it < self.warmup:
            return math.log(self.it + 1) / math.log(self.warmup) if self.log_curve else self.it / self.warmup
        if self.total is None:
            return 1.0
        return max(0.0, (self.total - self.it) / max(1.0, self.total - self.warmup))

    def _lr(self):
        return self.lo + (self.hi - self.lo) * self._gamma()


class RefDeepSpeedWarmupCosine(RefDeepSpeedSchedule):
    # DeepSpeed's WarmupCosineLR (deepspeed/runtime/lr_schedules.py): ratios of the optimizer's lr;
    # get_lr() is 0 before the first step() (last_batch_iteration -1), so the first optimizer step runs
    # at lr 0; the cosine's denominator is at least 1 (DeepSpeed's guard for total == warmup).
    def __init__(self, optimizer, options, base_lr, W, T):
        self.optimizer = optimizer
        self.base = base_lr
        self.total = options.get("total_num_steps", T)
        self.min_ratio = options.get("warmup_min_ratio", 0.0)
        self.warmup = max(2, options.get("warmup_num_steps", W))
        self.cos_min = options.get("cos_min_ratio", 0.0001)
        self.log_curve = options.get("warmup_type", "log") == "log"
        self.it = -1
        self._set(0.0)

    def _ratio(self):
        if self.it < self.warmup:
            r = math.log(self.it + 1) / math.log(self.warmup) if self.log_curve else self.it / self.warmup
            return self.min_ratio + r * (1.0 - self.min_ratio)
        last, total = self.it - self.warmup + 1, max(1, self.total - self.warmup)
        return max(0.0, self.cos_min + (1.0 - self.cos_min) * (1 + math.cos(math.pi * last / total)) / 2)

    def _lr(self):
        return self.base * self._ratio()


def make_schedule(case, opt, W, T):
    name, options, base_lr = case["scheduler"], case["scheduler_options"], case["training"]["learning_rate"]
    if name in ("WarmupLR", "WarmupDecayLR"):
        return RefDeepSpeedWarmup(opt, name, options, base_lr, W, T)
    if name == "WarmupCosineLR":
        return RefDeepSpeedWarmupCosine(opt, options, base_lr, W, T)
    if name == "reduce_lr_on_plateau":  # no warmup; stepped after each evaluation
        return torch.optim.lr_scheduler.ReduceLROnPlateau(opt, **options)
    if name == "constant":
        W = 0  # HF's get_scheduler ignores warmup for `constant`
    return torch.optim.lr_scheduler.LambdaLR(opt, hf_lambda(name, options, W, T, base_lr))
