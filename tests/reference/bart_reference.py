#!/usr/bin/env python3
# Reference test for the `bart` family (HF BartForConditionalGeneration): HF-layout BART directories
# (config.json + safetensors) are made here with random weights -- a tied post-LN gelu model (the file
# holds model.shared.weight only), an untied one with scale_embedding, split over two shards and carrying
# the encoder/decoder embed_tokens copies some files have, and a relu model whose file names the embedding
# only through those copies (plus a tied lm_head copy) -- all with encoder_layers != decoder_layers and
# different head counts per stack, and a non-zero final_logits_bias. A float64 forward written here from
# the BART architecture (paper, arXiv:1910.13461, and HF's BartConfig fields) gives the expected logits,
# loss and gradients: token embedding (times sqrt(d_model) with scale_embedding) plus a learned position
# row read at position + 2, a LayerNorm of that sum, post-LN residual sublayers (self-attention, the
# decoder's cross-attention, fc1 -> activation -> fc2), attention softmax(q k^T / sqrt(head_dim) + mask)
# with biased projections, padded source keys masked in the encoder and the cross-attention, causal
# decoder self-attention, decoder inputs = labels shifted right after decoder_start_token_id, and
# logits = lm_head(x) + final_logits_bias.
# hftrain loads each directory through model.from_pretrained (the hidden Catch2 case "[seq2seq_ref]",
# shared with t5_reference.py), and must agree to 1e-5 in logits, loss and every parameter's gradient;
# the directory it saves right away, and the one it saves after a few optimizer steps, must load here
# (HF names, config keys, the embedding stored once) and give hftrain's logits. Needs only Python 3 and
# torch. Exit 0 = agreement.
import math
import os
import sys

try:
    import torch
except ImportError:
    sys.exit("bart_reference: this Python (%s) cannot import torch; configure with "
             "-DHFTRAIN_REFERENCE_PYTHON=/path/to/python3" % sys.executable)

from hf_reference_harness import compare_with_hftrain, rand, write_model_dir  # noqa: E402
from seq2seq_harness import (SEQ2SEQ_ENV, SEQ2SEQ_TAG, seq2seq_canonical, seq2seq_checks,  # noqa: E402
                             seq2seq_inputs, seq2seq_loss, seq2seq_shift_right)
from safetensors_io import write_safetensors  # noqa: E402

NEG = torch.finfo(torch.float64).min
OFFSET = 2  # BART's position rows start at 2
EMBED_COPIES = ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight")

ACT = {"relu": torch.relu, "gelu": lambda x: 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0))),
       "gelu_new": lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
       "silu": lambda x: x * torch.sigmoid(x)}


# ---- the BART architecture in float64 --------------------------------------------------------------
def bart_forward(cfg, W, ids, mask, labels):
    """Logits [B, T, V] of BartForConditionalGeneration for a batch with labels (dropout off)."""
    g = lambda n: W[n].double()
    d = cfg["d_model"]
    act = ACT[cfg.get("activation_function", "gelu")]
    scale = math.sqrt(d) if cfg.get("scale_embedding", False) else 1.0
    emb = g("model.shared.weight")

    def ln(x, p):  # LayerNorm, eps 1e-5, biased variance
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + 1e-5) * g(p + ".weight") + g(p + ".bias")

    def lin(x, p):
        return x @ g(p + ".weight").T + g(p + ".bias")

    def attention(p, x, memory, bias, heads):
        B, Tq, Tk = x.shape[0], x.shape[1], memory.shape[1]
        hd = d // heads
        split = lambda t, T: t.view(B, T, heads, hd).transpose(1, 2)
        q = split(lin(x, p + "q_proj") * hd ** -0.5, Tq)
        k = split(lin(memory, p + "k_proj"), Tk)
        v = split(lin(memory, p + "v_proj"), Tk)
        scores = q @ k.transpose(-1, -2) + bias
        scores = scores - scores.max(-1, keepdim=True).values
        probs = scores.exp() / scores.exp().sum(-1, keepdim=True)
        return lin((probs @ v).transpose(1, 2).reshape(B, Tq, d), p + "out_proj")

    def embed(stack, tokens):
        T = tokens.shape[1]
        x = emb[tokens] * scale + g(stack + "embed_positions.weight")[torch.arange(T) + OFFSET]
        return ln(x, stack + "layernorm_embedding")

    def ffn(p, x):
        return lin(act(lin(x, p + "fc1")), p + "fc2")

    # encoder
    B, S = ids.shape
    if mask is None:
        mask = torch.ones(B, S, dtype=torch.int64)
    pad = (1.0 - mask.double())[:, None, None, :] * NEG  # padded source keys get no weight
    x = embed("model.encoder.", ids)
    for i in range(cfg["encoder_layers"]):
        p = "model.encoder.layers.%d." % i
        x = ln(x + attention(p + "self_attn.", x, x, pad, cfg["encoder_attention_heads"]), p + "self_attn_layer_norm")
        x = ln(x + ffn(p, x), p + "final_layer_norm")
    memory = x

    # decoder
    dec = seq2seq_shift_right(cfg, labels)
    T = dec.shape[1]
    causal = torch.zeros(T, T, dtype=torch.float64).masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), NEG)
    y = embed("model.decoder.", dec)
    H = cfg["decoder_attention_heads"]
    for i in range(cfg["decoder_layers"]):
        p = "model.decoder.layers.%d." % i
        y = ln(y + attention(p + "self_attn.", y, y, causal, H), p + "self_attn_layer_norm")
        y = ln(y + attention(p + "encoder_attn.", y, memory, pad, H), p + "encoder_attn_layer_norm")
        y = ln(y + ffn(p, y), p + "final_layer_norm")
    head = emb if cfg.get("tie_word_embeddings", True) else g("lm_head.weight")
    return y @ head.T + g("final_logits_bias")


# ---- cases -----------------------------------------------------------------------------------------
def bart_config(**over):
    cfg = {"model_type": "bart", "architectures": ["BartForConditionalGeneration"], "vocab_size": 41, "d_model": 24,
           "encoder_layers": 2, "decoder_layers": 3, "encoder_attention_heads": 4, "decoder_attention_heads": 2,
           "encoder_ffn_dim": 40, "decoder_ffn_dim": 36, "activation_function": "gelu", "dropout": 0.0,
           "attention_dropout": 0.0, "activation_dropout": 0.0, "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0,
           "max_position_embeddings": 16, "init_std": 0.02, "scale_embedding": False, "tie_word_embeddings": True,
           "is_encoder_decoder": True, "use_cache": True, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
           "decoder_start_token_id": 2, "forced_eos_token_id": 2, "num_hidden_layers": 2,
           "transformers_version": "4.40.0"}
    cfg.update(over)
    return cfg


def bart_weights(gen, cfg):
    d, V = cfg["d_model"], cfg["vocab_size"]
    W = {"model.shared.weight": rand(gen, V, d, std=1.0)}

    def linear(p, n_in, n_out):
        W[p + ".weight"] = rand(gen, n_out, n_in, std=n_in ** -0.5)
        W[p + ".bias"] = rand(gen, n_out, std=0.1)

    def norm(p):
        W[p + ".weight"] = rand(gen, d, std=0.1, mean=1.0)
        W[p + ".bias"] = rand(gen, d, std=0.1)

    for decoder in (False, True):
        stack = "model.decoder." if decoder else "model.encoder."
        ffn = cfg["decoder_ffn_dim" if decoder else "encoder_ffn_dim"]
        W[stack + "embed_positions.weight"] = rand(gen, cfg["max_position_embeddings"] + OFFSET, d, std=0.5)
        for i in range(cfg["decoder_layers" if decoder else "encoder_layers"]):
            p = stack + "layers.%d." % i
            for a in ("self_attn", "encoder_attn") if decoder else ("self_attn",):
                for n in ("k_proj", "v_proj", "q_proj", "out_proj"):
                    linear(p + a + "." + n, d, d)
                norm(p + a + "_layer_norm")
            linear(p + "fc1", d, ffn)
            linear(p + "fc2", ffn, d)
            norm(p + "final_layer_norm")
        norm(stack + "layernorm_embedding")
    if not cfg["tie_word_embeddings"]:
        W["lm_head.weight"] = rand(gen, V, d, std=0.5)
    W["final_logits_bias"] = rand(gen, 1, V, std=0.5)
    return W


def make_cases(root):
    gen = torch.Generator().manual_seed(2019)
    cases = []

    def add(name, cfg, file_tensors, shards=1):
        W = seq2seq_canonical(cfg, file_tensors, "model.shared.weight", EMBED_COPIES)
        ids, mask, labels = seq2seq_inputs(gen, cfg["vocab_size"], cfg["pad_token_id"], cfg["eos_token_id"], 3)
        leaves = {k: v.double().requires_grad_(k != "final_logits_bias") for k, v in W.items()}
        logits = bart_forward(cfg, leaves, ids, mask, labels)
        loss = seq2seq_loss(logits, labels)
        loss.backward()
        d = os.path.join(root, name)
        write_model_dir(os.path.join(d, "model"), cfg, file_tensors, shards)
        inputs = {"input_ids": ids, "attention_mask": mask, "labels": labels}
        write_safetensors(os.path.join(d, "inputs.safetensors"), list(inputs.items()))
        cases.append({"name": name, "dir": d, "config": cfg, "weights": W, "inputs": inputs,
                      "logits": logits.detach(), "loss": loss.detach(),
                      "grads": {k: v.grad for k, v in leaves.items() if v.requires_grad}})

    # Tied head, post-LN gelu (BART's defaults), 2 encoder / 3 decoder layers with 4 / 2 heads; the file
    # holds model.shared.weight only.
    cfg = bart_config()
    add("bart_tied_gelu", cfg, bart_weights(gen, cfg))
    # Untied lm_head, scale_embedding, gelu_new, 3 encoder / 1 decoder layers, 2 / 6 heads, its own ids;
    # the file carries the embed_tokens copies too and is split over two shards.
    cfg = bart_config(tie_word_embeddings=False, scale_embedding=True, activation_function="gelu_new",
                      encoder_layers=3, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=6,
                      num_hidden_layers=3, pad_token_id=0, eos_token_id=1, decoder_start_token_id=1,
                      forced_eos_token_id=1, dropout=0.1, attention_dropout=0.1, activation_dropout=0.1)
    W = bart_weights(gen, cfg)
    ft = dict(W)
    for k in EMBED_COPIES:
        ft[k] = W["model.shared.weight"]
    add("bart_untied_scaled_sharded", cfg, ft, shards=2)
    # Tied, relu: the file names the embedding only through its encoder / decoder copies and carries a
    # tied lm_head copy.
    cfg = bart_config(activation_function="relu", encoder_layers=1, decoder_layers=2, encoder_attention_heads=3,
                      decoder_attention_heads=4, num_hidden_layers=1)
    W = bart_weights(gen, cfg)
    ft = {k: v for k, v in W.items() if k != "model.shared.weight"}
    for k in EMBED_COPIES:
        ft[k] = W["model.shared.weight"]
    ft["lm_head.weight"] = W["model.shared.weight"]
    add("bart_tied_relu_embed_copies", cfg, ft)
    return cases


# Config keys HF's BartConfig needs to rebuild each model with the same shapes and numerics.
NEEDED_KEYS = ["vocab_size", "d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads",
               "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim", "activation_function",
               "max_position_embeddings", "scale_embedding", "tie_word_embeddings", "is_encoder_decoder",
               "pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "forced_eos_token_id"]


def main():
    return compare_with_hftrain("bart", make_cases, SEQ2SEQ_ENV, SEQ2SEQ_TAG,
                                seq2seq_checks("bart", "BartForConditionalGeneration", NEEDED_KEYS, bart_forward))


if __name__ == "__main__":
    sys.exit(main())
