# LoRA and DoRA adapters in PEFT's layout, as the reference scripts model them (lora_reference.py,
# nf4_reference.py, int8_reference.py, bnb_checkpoint_reference.py): the modules a LoraConfig adapts, the
# adapter file's random tensors, the expected logits, loss and gradients from the papers' formulas (merged
# weights, or the adapted layers applied unmerged), the gradient error measure, and the guards of the
# reference itself (the unmerged forward equals the merged one; every case tells its variants apart).
import math
import re

import torch
import torch.nn.functional as F

from hf_family_forwards import FORWARDS, causal_loss
from hf_reference_harness import close, rand

PREFIX = "base_model.model."
EMBEDDINGS = ("wte", "wpe", "embed_tokens", "word_embeddings", "position_embeddings", "token_type_embeddings")
CONV1D = ("gpt2",)  # families whose linear layers are HF Conv1D, weight stored [in, out]
VARIANT_GAP = 1e-3  # every variant a case tells apart must move its logits or gradients at least this much


# ---- PEFT's module selection -------------------------------------------------------------------------
def linear_modules(W):
    """Module name -> weight of every linear layer (2-D .weight that is not an embedding)."""
    out = {}
    for k, t in W.items():
        if k.endswith(".weight") and t.dim() == 2 and k.split(".")[-2] not in EMBEDDINGS:
            out[k[:-len(".weight")]] = t
    return out


def module_names(W):
    return sorted({".".join(k.split(".")[:i]) for k in W for i in range(1, len(k.split(".")))})


def name_matches(entries, name):
    """A list of names matches a module named like an entry or ending with "." + entry."""
    return any(name == e or name.endswith("." + e) for e in entries)


def target_matches(acfg, name):
    t = acfg["target_modules"]
    if isinstance(t, str):
        return re.fullmatch(t, name) is not None
    return name_matches(t, name)


def layer_index(name):
    """The index of the layer a module sits in: the last all-digit path component with more after it."""
    found = re.findall(r"\.(\d+)\.", "." + name)
    return int(found[-1]) if found else None


def pattern_value(pattern, name, default):
    for key, value in pattern.items():
        if re.match(r"(.*\.)?%s$" % key, name):
            return value
    return default


def adapted_modules(acfg, W):
    """[(module name, r, alpha)] of the modules the config adapts; a match that is no linear layer is an error."""
    linears = linear_modules(W)
    out = []
    for name in module_names(W):
        if not target_matches(acfg, name):
            continue
        if acfg.get("layers_to_transform") is not None and layer_index(name) not in acfg["layers_to_transform"]:
            continue
        if name not in linears:
            raise AssertionError("target_modules matches %s, which is no linear layer" % name)
        out.append((name, pattern_value(acfg["rank_pattern"], name, acfg["r"]),
                    pattern_value(acfg["alpha_pattern"], name, acfg["lora_alpha"])))
    if not out:
        raise AssertionError("target_modules %r matches no module" % (acfg["target_modules"],))
    return out


def adapter_config(family, task_type, **over):
    cfg = {"peft_type": "LORA", "task_type": task_type, "r": 8, "lora_alpha": 8, "lora_dropout": 0.0,
           "target_modules": None, "bias": "none", "modules_to_save": None, "fan_in_fan_out": family in CONV1D,
           "use_rslora": False, "use_dora": False, "init_lora_weights": True, "layers_to_transform": None,
           "layers_pattern": None, "rank_pattern": {}, "alpha_pattern": {}, "base_model_name_or_path": None,
           "inference_mode": True}
    cfg.update(over)
    return cfg


# ---- the adapter's tensors ---------------------------------------------------------------------------
def as_linear(family, t):
    """A stored weight in nn.Linear's [out, in] layout."""
    return t.t() if family in CONV1D else t


def make_adapter(gen, family, acfg, W):
    """The adapter file's tensors, in the order PEFT's names sort: random A, non-zero B, a magnitude away
    from ||W + s B A|| for DoRA, modules_to_save and biases perturbed from the base model's."""
    T = {}
    mods = adapted_modules(acfg, W)
    adapted = {name for name, _, _ in mods}
    for name, r, alpha in mods:
        out_f, in_f = as_linear(family, W[name + ".weight"]).shape
        T[PREFIX + name + ".lora_A.weight"] = rand(gen, r, in_f, std=0.3)
        T[PREFIX + name + ".lora_B.weight"] = rand(gen, out_f, r, std=0.3)
        if acfg["use_dora"]:
            s = scaling(acfg, r, alpha, ())
            V = as_linear(family, W[name + ".weight"]).double() + \
                s * T[PREFIX + name + ".lora_B.weight"].double() @ T[PREFIX + name + ".lora_A.weight"].double()
            T[PREFIX + name + ".lora_magnitude_vector"] = \
                (V.norm(dim=1) * torch.exp(0.1 * torch.randn(out_f, generator=gen, dtype=torch.float64))).float()
    saved_whole = [m for m in module_names(W) if acfg["modules_to_save"] and name_matches(acfg["modules_to_save"], m)]
    for m in saved_whole:
        for k in (m + ".weight", m + ".bias"):
            if k in W:
                T[PREFIX + k] = W[k] + rand(gen, *W[k].shape, std=0.1)
    if acfg["bias"] in ("all", "lora_only"):
        for k in W:
            module = k[:-len(".bias")]
            if not k.endswith(".bias") or (acfg["bias"] == "lora_only" and module not in adapted):
                continue
            name = PREFIX + (module + ".base_layer.bias" if module in adapted else k)
            if name not in T:
                T[name] = W[k] + rand(gen, *W[k].shape, std=0.1)
    return T, mods


def base_name(adapter_name):
    """The base model's tensor an adapter file's whole tensor (bias, modules_to_save) replaces."""
    return adapter_name[len(PREFIX):].replace(".base_layer.", ".")


# ---- the formulas ------------------------------------------------------------------------------------
def scaling(acfg, r, alpha, ignore):
    if "alpha_pattern" in ignore:
        alpha = acfg["lora_alpha"]
    return alpha / math.sqrt(r) if acfg["use_rslora"] and "rslora" not in ignore else alpha / r


class UnmergedLinear:
    """An adapted layer applied the unmerged way, W x + s B (A x) (times m / ||W + s B A||_row for DoRA),
    standing in for its weight inside the forwards (which apply weights as `h @ w` for Conv1D and
    `h @ w.T` for nn.Linear)."""

    def __init__(self, stored, A, B, s, conv, dora_scale, transposed=False):
        self.stored, self.A, self.B, self.s, self.conv = stored, A, B, s, conv
        self.dora_scale, self.transposed = dora_scale, transposed

    def double(self):
        return self

    @property
    def T(self):
        return UnmergedLinear(self.stored, self.A, self.B, self.s, self.conv, self.dora_scale, not self.transposed)

    def __rmatmul__(self, h):
        if self.transposed == self.conv:
            raise AssertionError("a forward applied an adapted weight in an unexpected orientation")
        y = h @ (self.stored if self.conv else self.stored.t()) + self.s * (h @ self.A.t()) @ self.B.t()
        return y if self.dora_scale is None else y * self.dora_scale


def effective_weights(case, leaves, ignore=(), unmerged=False):
    """The model's float64 weights with the adapter applied: merged (W' from the formulas) or, with
    unmerged, the adapted layers as UnmergedLinear. `ignore` names a feature to leave out (a variant)."""
    family, acfg = case["type"], case["adapter_config"]
    E = {k: v.double() for k, v in case["weights"].items()}
    for k, t in leaves.items():
        if ".lora_" in k:
            continue
        module = base_name(k).rsplit(".", 1)[0]
        saved_whole = bool(acfg["modules_to_save"]) and name_matches(acfg["modules_to_save"], module)
        if ("modules_to_save" if saved_whole else "bias") not in ignore:
            E[base_name(k)] = t
    for name, r, alpha in case["modules"]:
        A, B = leaves[PREFIX + name + ".lora_A.weight"], leaves[PREFIX + name + ".lora_B.weight"]
        if A.shape[0] != r or B.shape[1] != r:
            raise AssertionError("%s: rank %d, tensors %s / %s" % (name, r, list(A.shape), list(B.shape)))
        s = scaling(acfg, r, alpha, ignore)
        W0 = as_linear(family, E[name + ".weight"])
        V = W0 + s * B @ A
        scale = None
        if acfg["use_dora"] and "dora" not in ignore:
            norm = V.norm(dim=1)
            scale = leaves[PREFIX + name + ".lora_magnitude_vector"] / (norm if "detach" in ignore else norm.detach())
        if unmerged:
            E[name + ".weight"] = UnmergedLinear(E[name + ".weight"], A, B, s, family in CONV1D, scale)
            continue
        merged = V if scale is None else scale[:, None] * V
        E[name + ".weight"] = merged.t() if family in CONV1D else merged
    return E


def loss_of(case, logits):
    labels = case["inputs"]["labels"]
    return causal_loss(logits, labels) if case["type"] != "bert" else F.cross_entropy(logits, labels)


def expected(case, ignore=(), unmerged=False):
    """(logits, loss, gradients of the adapter's tensors, merged weights) under the formulas."""
    leaves = {k: v.double().requires_grad_(True) for k, v in case["adapter"].items()}
    E = effective_weights(case, leaves, ignore, unmerged)
    logits = FORWARDS[case["type"]](case["config"], E, case["inputs"])
    loss = loss_of(case, logits)
    loss.backward()
    merged = {k: v.detach() for k, v in E.items() if isinstance(v, torch.Tensor)}
    grads = {k: v.grad if v.grad is not None else torch.zeros_like(v) for k, v in leaves.items()}
    return logits.detach(), loss.detach(), grads, merged


ZERO_GRAD = 1e-12  # a gradient below this times the largest of the case is zero in exact arithmetic


def exactly_zero(grads):
    """The tensors whose gradient is zero in exact arithmetic, hence rounding noise in any implementation:
    attention key biases (softmax does not change when q.b_k is added to a whole row of scores)."""
    top = max(g.abs().max().item() for g in grads.values())
    return {k for k, g in grads.items() if g.abs().max().item() <= ZERO_GRAD * top}


def grad_errors(got, want):
    """Per tensor, the largest difference over the reference's largest entry of that tensor; for a tensor
    whose gradient is zero in exact arithmetic, over the largest entry of the whole case's gradients."""
    top = max(g.abs().max().item() for g in want.values())
    zero = exactly_zero(want)
    out = {}
    for k in sorted(set(got) & set(want)):
        if list(got[k].shape) != list(want[k].shape):
            out[k] = math.inf
            continue
        scale = top if k in zero else want[k].abs().max().item()
        out[k] = (got[k].double() - want[k]).abs().max().item() / scale
    return out


def variants(case):
    """The features each case must tell apart from their absence: (name, features left out)."""
    acfg, out = case["adapter_config"], [("no adapter", None)]
    if acfg["use_dora"]:
        out += [("LoRA without the magnitude", ("dora",)), ("norm not detached", ("detach",))]
    if acfg["use_rslora"]:
        out.append(("alpha / r instead of rslora", ("rslora",)))
    if acfg["alpha_pattern"]:
        out.append(("alpha_pattern ignored", ("alpha_pattern",)))
    if acfg["bias"] != "none":
        out.append(("the base model's biases", ("bias",)))
    if acfg["modules_to_save"]:
        out.append(("the base model's classifier", ("modules_to_save",)))
    return out


def check_reference(case):
    """Guards of the reference itself: the unmerged forward gives the merged one's logits and gradients,
    every adapter tensor has a non-zero gradient, and each variant moves the logits or the gradients."""
    logits, loss, grads, _ = case["expected"]
    u_logits, u_loss, u_grads, _ = expected(case, unmerged=True)
    err = max([close(u_logits, logits)[1], close(u_loss, loss)[1]] + list(grad_errors(u_grads, grads).values()))
    if err > 1e-10:
        raise AssertionError("%s: unmerged and merged forwards differ by %.3g" % (case["name"], err))
    zero = sorted(exactly_zero(grads))
    if any(not k.endswith(".attention.self.key.bias") for k in zero):
        raise AssertionError("%s: the gradients of %s are zero" % (case["name"], zero))
    gaps = []
    for what, ignore in variants(case):
        if ignore is None:
            other = FORWARDS[case["type"]](case["config"], case["weights"], case["inputs"])
            gap = close(other, logits)[1]
        else:
            v_logits, _, v_grads, _ = expected(case, ignore)
            gap = max([close(v_logits, logits)[1]] + list(grad_errors(v_grads, grads).values()))
        if gap < VARIANT_GAP:
            raise AssertionError("%s: %s changes the results by only %.3g" % (case["name"], what, gap))
        gaps.append("%s %.2g" % (what, gap))
    return err, gaps
