# The cases of gpt_reference.py's loop comparison: the model and data sizes, each optimizer's and schedule's
# settings, and the three case tables (the optimizer x schedule matrix, the extra schedules and optimizer
# options, and the memory-efficient optimizers of --suite memory). Plain Python (no torch).
import itertools

MODEL = {"n_layer": 1, "n_head": 2, "n_embd": 16}
NUM_DIGITS = 4
MAX_STEPS = 50

# Adafactor's eps1 is 1e-10 here rather than 1e-30: the attention key bias has a gradient that is zero
# in exact arithmetic, and with eps1 1e-30 Adafactor scales its rounding noise (~1e-10) up to
# full-size updates, so any two implementations (HF's included) part ways after a few steps.
ADAFACTOR_EPS = {"eps1": 1e-10}

# Per optimizer: learning rate, training-section hyperparameters, `optimizer:` options, and the
# clip threshold of the clipping-on cases (chosen so that some steps clip and others do not).
OPTIMIZERS = {
    "adamw": {"learning_rate": 3e-3, "training": {"adam_beta1": 0.9, "adam_beta2": 0.999, "adam_epsilon": 1e-8},
              "options": {}, "clip": 1.0},
    "adam": {"learning_rate": 2e-3, "training": {"adam_beta1": 0.85, "adam_beta2": 0.98, "adam_epsilon": 1e-6},
             "options": {}, "clip": 1.1},
    "sgd": {"learning_rate": 0.05, "training": {}, "options": {"momentum": 0.9, "nesterov": True}, "clip": 1.0},
    "adafactor": {"learning_rate": 3e-3, "training": {}, "options": dict(ADAFACTOR_EPS), "clip": 1.25},
    "lion": {"learning_rate": 3e-4, "training": {"adam_beta1": 0.9, "adam_beta2": 0.99}, "options": {}, "clip": 1.2},
}
# Optimizers checked only in the extra cases (not the full schedule matrix).
EXTRA_OPTIMIZERS = {
    "adagrad": {"learning_rate": 0.02, "training": {}, "options": {}, "clip": 1.0},
}

# Per schedule: `scheduler:` options (non-default where HF has options, to prove they are honoured).
SCHEDULES = {
    "linear": {},
    "cosine": {},
    "cosine_with_restarts": {"num_cycles": 2},
    "polynomial": {"lr_end": 1e-5, "power": 2.0},
    "inverse_sqrt": {},
}

# GA=1: 100 examples / 8 = 13 batches (the last of 4), 13 steps per epoch. GA=3: windows of
# 3,3,3,3 and a short one of 1 per epoch, 5 steps per epoch, so 50 steps span 10 epochs.
DATA = {"train_size": 100}
BATCH = 8


def matrix_cases():
    cases = []
    # Pairwise rather than the full product (100 runs): each (optimizer, schedule) pair k runs GA 1 and GA 3,
    # clipping on with GA 1 when k is even and with GA 3 when k is odd.
    pairs = list(itertools.product(OPTIMIZERS, SCHEDULES))
    combos = [(opt, sched, ga, (ga == 1) == (k % 2 == 0)) for k, (opt, sched) in enumerate(pairs) for ga in (1, 3)]
    for i, (opt, sched, ga, clip) in enumerate(combos):
        o = OPTIMIZERS[opt]
        tr = {"per_device_train_batch_size": BATCH, "gradient_accumulation_steps": ga, "max_steps": MAX_STEPS,
              "learning_rate": o["learning_rate"], "weight_decay": 0.1 if i % 2 else 0.05,
              "max_grad_norm": o["clip"] if clip else 0.0, "seed": 100 + i}
        tr.update(o["training"])
        # Alternate the two ways of asking for warmup, and a separate data_seed.
        if i % 3 == 0:
            tr["warmup_ratio"] = 0.15  # ceil(50 * 0.15) = 8 steps
        else:
            tr["warmup_steps"] = 5
        if i % 4 == 1:
            tr["data_seed"] = 1000 + i
        cases.append({"name": "%s-%s-ga%d-%s" % (opt, sched, ga, "clip" if clip else "noclip"),
                      "optimizer": opt, "optimizer_options": dict(o["options"]),
                      "scheduler": sched, "scheduler_options": dict(SCHEDULES[sched]),
                      "training": tr, "data": dict(DATA, seed=7 + i), "init_seed": 1 + i % 7,
                      "expect_clipping": clip})
    return cases


def extra_cases():
    # The remaining schedules (HF and DeepSpeed) and optimizer options, with GA=1 and clipping on.
    extras = [
        ("adamw", {}, "constant", {}),
        ("adamw", {}, "constant_with_warmup", {}),
        ("adamw", {}, "cosine_with_min_lr", {"min_lr_rate": 0.1}),
        ("adamw", {}, "cosine_with_min_lr", {"min_lr": 5e-4, "num_cycles": 0.75}),
        ("adamw", {}, "warmup_stable_decay", {"num_decay_steps": 20, "warmup_type": "cosine",
                                              "decay_type": "1-sqrt", "min_lr_ratio": 0.05}),
        ("adamw", {}, "warmup_stable_decay", {"num_decay_steps": 15, "num_stable_steps": 20}),
        ("adamw", {}, "inverse_sqrt", {"timescale": 20}),
        ("adamw", {}, "WarmupLR", {"warmup_min_lr": 1e-4, "warmup_num_steps": 10, "warmup_type": "linear"}),
        ("adamw", {}, "WarmupDecayLR", {}),
        ("adamw", {}, "WarmupCosineLR", {"warmup_min_ratio": 0.1, "cos_min_ratio": 0.05, "warmup_num_steps": 10}),
        ("adamw", {}, "WarmupCosineLR", {"warmup_type": "linear"}),
        ("sgd", {"momentum": 0.8, "dampening": 0.3}, "linear", {}),
        ("sgd", {}, "linear", {}),
        ("adafactor", {"beta1": 0.9, "scale_parameter": True}, "linear", {}),
        ("adafactor", {"relative_step": True, "scale_parameter": True, "warmup_init": True, "clip_threshold": 0.5,
                       "decay_rate": -0.6}, "linear", {}),
        ("lion", {"beta1": 0.95, "beta2": 0.98}, "cosine", {}),
        ("adagrad", {}, "linear", {}),
        ("adagrad", {"lr_decay": 0.01, "initial_accumulator_value": 0.1, "eps": 1e-8}, "cosine", {}),
        # Evaluates every 5 steps; the lr halves whenever eval_loss improves by less than 2%.
        ("adamw", {}, "reduce_lr_on_plateau", {"factor": 0.5, "patience": 0, "threshold": 0.02}),
    ]
    cases = []
    for j, (opt, opt_options, sched, sched_options) in enumerate(extras):
        o = OPTIMIZERS[opt] if opt in OPTIMIZERS else EXTRA_OPTIMIZERS[opt]
        i = 200 + j
        tr = {"per_device_train_batch_size": BATCH, "gradient_accumulation_steps": 1, "max_steps": MAX_STEPS,
              "learning_rate": o["learning_rate"], "weight_decay": 0.1, "max_grad_norm": o["clip"], "seed": i,
              "warmup_steps": 6}
        tr.update(o["training"])
        data = dict(DATA, seed=i)
        if sched == "reduce_lr_on_plateau":
            tr.update({"eval_strategy": "steps", "eval_steps": 5, "per_device_eval_batch_size": 16})
            data["eval_size"] = 40  # batches of 16, 16, 8
        tag = ",".join("%s=%s" % kv for kv in sorted(dict(opt_options, **sched_options).items()))
        cases.append({"name": "extra-%s-%s%s" % (opt, sched, "[" + tag + "]" if tag else ""),
                      "optimizer": opt, "optimizer_options": dict(ADAFACTOR_EPS, **opt_options) if opt == "adafactor" else opt_options,
                      "scheduler": sched, "scheduler_options": sched_options,
                      "training": tr, "data": data, "init_seed": j % 5 + 1, "expect_clipping": None})
    return cases


# The memory-efficient optimizers (--suite memory): 8-bit AdamW with blocks of 256 and of 2048 (every tensor
# of this model fits one block of 2048), GaLore with AdamW for each proj_type, with 8-bit AdamW and with
# Adafactor as the inner optimizer, and the single-regex form of optim_target_modules. rank 4 on 16-wide
# matrices (so the projection is a real reduction); update_proj_gap 20 refreshes the projection at steps
# 1, 21 and 41 of the 50; min_8bit_size 0 quantises even this tiny model's moments.
GALORE = {"rank": 4, "update_proj_gap": 20, "scale": 0.25}
GALORE_TARGETS = ["attn", "mlp"]  # list form: substrings -> c_attn, attn.c_proj, c_fc, mlp.c_proj (Linear only)


def memory_cases():
    specs = [
        ("adamw_8bit", {"block_size": 256, "min_8bit_size": 0}, None),
        ("adamw_8bit", {"min_8bit_size": 0}, None),
    ]
    for proj in ("std", "reverse_std", "left", "right", "full"):
        specs.append(("galore_adamw", dict(GALORE, proj_type=proj), GALORE_TARGETS))
    specs += [
        ("galore_adamw_8bit", dict(GALORE, proj_type="std", block_size=64, min_8bit_size=0), GALORE_TARGETS),
        ("galore_adafactor", dict(GALORE, proj_type="std", **ADAFACTOR_EPS), GALORE_TARGETS),
        ("galore_adamw", dict(GALORE, proj_type="left"), r".*\.(c_attn|c_fc)"),
        # Layer-wise: the same updates applied inside backward (no clipping: refused for these).
        ("galore_adamw_layerwise", dict(GALORE, proj_type="std"), GALORE_TARGETS),
        ("galore_adamw_8bit_layerwise", dict(GALORE, proj_type="reverse_std", block_size=64, min_8bit_size=0),
         GALORE_TARGETS),
        ("galore_adafactor_layerwise", dict(GALORE, proj_type="full", **ADAFACTOR_EPS), GALORE_TARGETS),
        # LOMO / AdaLomo, with clipping (two backward passes) and without.
        ("lomo", {}, None),
        ("lomo", {}, None),
        ("adalomo", dict(ADAFACTOR_EPS), None),
        ("adalomo", dict(ADAFACTOR_EPS), None),
    ]
    cases = []
    for j, (opt, opt_options, targets) in enumerate(specs):
        i = 300 + j
        lr = {"lomo": 0.05, "adalomo": 1e-2}.get(opt, 3e-3)
        clip = 1.0 if j % 2 and not opt.endswith("_layerwise") else 0.0
        tr = {"per_device_train_batch_size": BATCH, "gradient_accumulation_steps": 1, "max_steps": MAX_STEPS,
              "learning_rate": lr, "weight_decay": 0.1, "max_grad_norm": clip, "seed": i,
              "warmup_steps": 5, "adam_beta1": 0.9, "adam_beta2": 0.999, "adam_epsilon": 1e-8}
        if targets is not None:
            tr["optim_target_modules"] = targets
        tag = ",".join("%s=%s" % kv for kv in sorted(opt_options.items()) if kv[0] not in ("eps1",))
        if isinstance(targets, str):
            tag += ",targets=regex"
        if clip:
            tag += ",clip"
        cases.append({"name": "memory-%s[%s]" % (opt, tag), "optimizer": opt, "optimizer_options": opt_options,
                      "scheduler": "cosine", "scheduler_options": {}, "training": tr, "data": dict(DATA, seed=i),
                      "init_seed": j % 5 + 1, "expect_clipping": None})
    return cases

