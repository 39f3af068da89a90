#!/usr/bin/env python3
# Reference test for the `t5` family (HF T5ForConditionalGeneration): HF-layout T5 directories
# (config.json + safetensors) are made here with random weights -- a tied T5 v1.0 (relu feed-forward,
# shared.weight only), an untied T5 v1.1 (gated-gelu, separate lm_head, sharded, with the
# encoder/decoder.embed_tokens copies some files carry) and a tied gelu variant whose file holds only
# the embed_tokens copies -- each with num_decoder_layers != num_layers. A float64 forward written here
# from the T5 architecture (paper, arXiv:1910.10683, and HF's T5Config fields) gives the expected logits,
# loss and gradients: RMS norms without mean or bias, attention scores q k^T without scaling, a learned
# per-head bias over relative position buckets (exact below num_buckets / 2, log-spaced up to
# max_distance; the encoder's buckets split by direction, the decoder's causal) shared by all blocks of
# a stack, pre-norm residual sublayers, decoder inputs = labels shifted right after
# decoder_start_token_id, and the tied head scaled by d_model^-0.5.
# hftrain loads each directory through model.from_pretrained (the hidden Catch2 case "[seq2seq_ref]",
# shared with bart_reference.py),
# and must agree to 1e-5 in logits, loss and every parameter's gradient; the directory it saves right
# away, and the one it saves after a few optimizer steps, must load here (HF names, config keys, the
# embedding stored once) and give hftrain's logits. Needs only Python 3 and torch. Exit 0 = agreement.
import math
import os
import sys

try:
    import torch
except ImportError:
    sys.exit("t5_reference: this Python (%s) cannot import torch; configure with "
             "-DHFTRAIN_REFERENCE_PYTHON=/path/to/python3" % sys.executable)

from hf_reference_harness import compare_with_hftrain, rand, write_model_dir  # noqa: E402
from seq2seq_harness import (SEQ2SEQ_ENV, SEQ2SEQ_TAG, seq2seq_canonical, seq2seq_checks,  # noqa: E402
                             seq2seq_inputs, seq2seq_loss, seq2seq_shift_right)
from safetensors_io import write_safetensors  # noqa: E402

NEG = torch.finfo(torch.float64).min


# ---- the T5 architecture in float64 ----------------------------------------------------------------
def bucket(rel, bidirectional, num_buckets, max_distance):
    """The bucket of relative position rel = key position - query position."""
    offset = 0
    if bidirectional:  # half of the buckets for keys after the query
        num_buckets //= 2
        offset = num_buckets if rel > 0 else 0
        dist = abs(rel)
    else:  # causal: only keys at or before the query are told apart
        dist = max(-rel, 0)
    exact = num_buckets // 2
    if dist < exact:
        return offset + dist
    scaled = math.log(dist / exact) / math.log(max_distance / exact) * (num_buckets - exact)
    # hftrain (like HF) computes this in float32: a distance this close to a bucket edge could round the
    # other way, so the cases are chosen to keep clear of edges.
    if abs(scaled - round(scaled)) < 1e-4 and 0 < round(scaled) < num_buckets - exact:
        raise AssertionError("distance %d lies on a bucket edge (%r); choose other bucket settings" % (dist, scaled))
    return offset + min(exact + int(scaled), num_buckets - 1)


def position_bias(table, q_len, k_len, bidirectional, cfg):
    """[1, H, q_len, k_len] from the bucket table [num_buckets, H]."""
    idx = torch.tensor([[bucket(k - q, bidirectional, cfg["relative_attention_num_buckets"],
                                cfg["relative_attention_max_distance"]) for k in range(k_len)] for q in range(q_len)])
    return table[idx].permute(2, 0, 1).unsqueeze(0)


ACT = {"relu": torch.relu, "gelu": lambda x: 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0))),
       "gelu_new": lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
       "silu": lambda x: x * torch.sigmoid(x)}


def feed_forward_kind(cfg):
    proj = cfg.get("feed_forward_proj", "relu")
    gated = proj.startswith("gated-")
    act = proj[len("gated-"):] if gated else proj
    return ("gelu_new" if proj == "gated-gelu" else act), gated


def t5_forward(cfg, W, ids, mask, labels):
    """Logits [B, T, V] of T5ForConditionalGeneration for a batch with labels."""
    return t5_forward_decoder_ids(cfg, W, ids, mask, seq2seq_shift_right(cfg, labels))


def t5_forward_decoder_ids(cfg, W, ids, mask, dec):
    """Logits [B, T, V] for source ids [B, S] (mask None = no padding) and decoder inputs dec [B, T]; W maps
    names to tensors (float64 taken here)."""
    g = lambda n: W[n].double()
    H, dkv, eps = cfg["num_heads"], cfg["d_kv"], cfg["layer_norm_epsilon"]
    n_dec = cfg.get("num_decoder_layers") or cfg["num_layers"]
    act_name, gated = feed_forward_kind(cfg)
    act = ACT[act_name]
    emb = g("shared.weight")

    def norm(x, w):
        return g(w) * x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)

    def attention(p, x, memory, bias):
        B, Tq, Tk = x.shape[0], x.shape[1], memory.shape[1]
        split = lambda t, T: t.view(B, T, H, dkv).transpose(1, 2)
        q = split(x @ g(p + "q.weight").T, Tq)
        k = split(memory @ g(p + "k.weight").T, Tk)
        v = split(memory @ g(p + "v.weight").T, Tk)
        scores = q @ k.transpose(-1, -2) + bias  # no 1/sqrt(d_kv): T5 folds it into the initialisation
        scores = scores - scores.max(-1, keepdim=True).values
        probs = scores.exp() / scores.exp().sum(-1, keepdim=True)
        return (probs @ v).transpose(1, 2).reshape(B, Tq, H * dkv) @ g(p + "o.weight").T

    def ff(p, x):
        h = act(x @ g(p + "wi_0.weight").T) * (x @ g(p + "wi_1.weight").T) if gated else act(x @ g(p + "wi.weight").T)
        return h @ g(p + "wo.weight").T

    # encoder
    B, S = ids.shape
    if mask is None:
        mask = torch.ones(B, S, dtype=torch.int64)
    pad = (1.0 - mask.double())[:, None, None, :] * NEG  # padded keys get no weight
    enc_bias = position_bias(g("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"), S, S, True, cfg) + pad
    x = emb[ids]
    for i in range(cfg["num_layers"]):
        p = "encoder.block.%d.layer." % i
        x = x + attention(p + "0.SelfAttention.", norm(x, p + "0.layer_norm.weight"),
                          norm(x, p + "0.layer_norm.weight"), enc_bias)
        x = x + ff(p + "1.DenseReluDense.", norm(x, p + "1.layer_norm.weight"))
    memory = norm(x, "encoder.final_layer_norm.weight")

    # decoder
    T = dec.shape[1]
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    self_bias = position_bias(g("decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"), T, T, False,
                              cfg).masked_fill(future, NEG)
    y = emb[dec]
    for i in range(n_dec):
        p = "decoder.block.%d.layer." % i
        h = norm(y, p + "0.layer_norm.weight")
        y = y + attention(p + "0.SelfAttention.", h, h, self_bias)
        y = y + attention(p + "1.EncDecAttention.", norm(y, p + "1.layer_norm.weight"), memory, pad)
        y = y + ff(p + "2.DenseReluDense.", norm(y, p + "2.layer_norm.weight"))
    y = norm(y, "decoder.final_layer_norm.weight")
    if cfg.get("tie_word_embeddings", True):
        return (y * cfg["d_model"] ** -0.5) @ emb.T
    return y @ g("lm_head.weight").T


# ---- cases -----------------------------------------------------------------------------------------
def t5_config(**over):
    cfg = {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"], "vocab_size": 45, "d_model": 32,
           "d_kv": 8, "d_ff": 48, "num_layers": 2, "num_decoder_layers": 3, "num_heads": 4,
           "relative_attention_num_buckets": 8, "relative_attention_max_distance": 6, "dropout_rate": 0.0,
           "layer_norm_epsilon": 1e-6, "initializer_factor": 1.0, "feed_forward_proj": "relu",
           "tie_word_embeddings": True, "is_encoder_decoder": True, "use_cache": True, "pad_token_id": 0,
           "eos_token_id": 1, "decoder_start_token_id": 0, "n_positions": 512, "transformers_version": "4.40.0"}
    cfg.update(over)
    return cfg


def t5_weights(gen, cfg):
    d, inner, V = cfg["d_model"], cfg["num_heads"] * cfg["d_kv"], cfg["vocab_size"]
    _, gated = feed_forward_kind(cfg)
    W = {"shared.weight": rand(gen, V, d, std=1.0)}

    def attention(p, relative):
        for n in ("q", "k", "v"):
            W[p + n + ".weight"] = rand(gen, inner, d, std=d ** -0.5)
        W[p + "o.weight"] = rand(gen, d, inner, std=inner ** -0.5)
        if relative:
            W[p + "relative_attention_bias.weight"] = rand(gen, cfg["relative_attention_num_buckets"], cfg["num_heads"],
                                                           std=1.0)

    def ff(p):
        for n in (("wi_0", "wi_1") if gated else ("wi",)):
            W[p + n + ".weight"] = rand(gen, cfg["d_ff"], d, std=d ** -0.5)
        W[p + "wo.weight"] = rand(gen, d, cfg["d_ff"], std=cfg["d_ff"] ** -0.5)

    norm = lambda: rand(gen, d, std=0.1, mean=1.0)
    for i in range(cfg["num_layers"]):
        p = "encoder.block.%d.layer." % i
        attention(p + "0.SelfAttention.", i == 0)
        W[p + "0.layer_norm.weight"] = norm()
        ff(p + "1.DenseReluDense.")
        W[p + "1.layer_norm.weight"] = norm()
    W["encoder.final_layer_norm.weight"] = norm()
    for i in range(cfg.get("num_decoder_layers") or cfg["num_layers"]):
        p = "decoder.block.%d.layer." % i
        attention(p + "0.SelfAttention.", i == 0)
        W[p + "0.layer_norm.weight"] = norm()
        attention(p + "1.EncDecAttention.", False)
        W[p + "1.layer_norm.weight"] = norm()
        ff(p + "2.DenseReluDense.")
        W[p + "2.layer_norm.weight"] = norm()
    W["decoder.final_layer_norm.weight"] = norm()
    if not cfg["tie_word_embeddings"]:
        W["lm_head.weight"] = rand(gen, V, d, std=0.5)
    return W


def make_cases(root):
    gen = torch.Generator().manual_seed(5150)
    cases = []

    def add(name, cfg, file_tensors, shards=1):
        W = seq2seq_canonical(cfg, file_tensors, "shared.weight", ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight"))
        ids, mask, labels = seq2seq_inputs(gen, cfg["vocab_size"], 0, 1, 2)
        leaves = {k: v.double().requires_grad_(True) for k, v in W.items()}
        logits = t5_forward(cfg, leaves, ids, mask, labels)
        loss = seq2seq_loss(logits, labels)
        loss.backward()
        d = os.path.join(root, name)
        write_model_dir(os.path.join(d, "model"), cfg, file_tensors, shards)
        inputs = {"input_ids": ids, "attention_mask": mask, "labels": labels}
        write_safetensors(os.path.join(d, "inputs.safetensors"), list(inputs.items()))
        cases.append({"name": name, "dir": d, "config": cfg, "weights": W, "inputs": inputs,
                      "logits": logits.detach(), "loss": loss.detach(),
                      "grads": {k: v.grad for k, v in leaves.items()}})

    # T5 v1.0: relu feed-forward, tied head (file: shared.weight only), 2 encoder / 3 decoder blocks;
    # max_distance 6 < the 11 source tokens, so the last buckets are shared by the far positions.
    cfg = t5_config()
    add("t5_v1_0_tied_relu", cfg, t5_weights(gen, cfg))
    # T5 v1.1: gated-gelu, untied lm_head, 3 encoder / 1 decoder blocks, 3 heads of 12 (inner 36 != d_model),
    # 16 buckets up to 20; the file carries the embed_tokens copies too, split over two shards.
    cfg = t5_config(feed_forward_proj="gated-gelu", tie_word_embeddings=False, num_layers=3, num_decoder_layers=1,
                    num_heads=3, d_kv=12, relative_attention_num_buckets=16, relative_attention_max_distance=20,
                    dropout_rate=0.1)
    W = t5_weights(gen, cfg)
    ft = dict(W)
    ft["encoder.embed_tokens.weight"] = W["shared.weight"]
    ft["decoder.embed_tokens.weight"] = W["shared.weight"]
    add("t5_v1_1_untied_gated_gelu", cfg, ft, shards=2)
    # tied, plain gelu (erf) feed-forward, num_decoder_layers null (= num_layers); the file names the
    # embedding only through its encoder/decoder copies and carries a tied lm_head copy.
    cfg = t5_config(feed_forward_proj="gelu", num_layers=2, num_decoder_layers=None, relative_attention_num_buckets=12,
                    relative_attention_max_distance=9, layer_norm_epsilon=1e-5)
    W = t5_weights(gen, cfg)
    ft = {k: v for k, v in W.items() if k != "shared.weight"}
    ft["encoder.embed_tokens.weight"] = W["shared.weight"]
    ft["decoder.embed_tokens.weight"] = W["shared.weight"]
    ft["lm_head.weight"] = W["shared.weight"]
    add("t5_tied_gelu_embed_copies", cfg, ft)
    return cases


# Config keys HF's T5Config needs to rebuild each model with the same shapes and numerics.
NEEDED_KEYS = ["vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_decoder_layers", "num_heads",
               "relative_attention_num_buckets", "relative_attention_max_distance", "layer_norm_epsilon",
               "feed_forward_proj", "tie_word_embeddings", "is_encoder_decoder", "pad_token_id", "eos_token_id",
               "decoder_start_token_id"]


def expected_value(cfg, key):
    if key == "num_decoder_layers" and cfg.get(key) is None:
        return cfg["num_layers"]
    return cfg.get(key)


def main():
    return compare_with_hftrain("t5", make_cases, SEQ2SEQ_ENV, SEQ2SEQ_TAG,
                                seq2seq_checks("t5", "T5ForConditionalGeneration", NEEDED_KEYS, t5_forward, expected_value))


if __name__ == "__main__":
    sys.exit(main())
