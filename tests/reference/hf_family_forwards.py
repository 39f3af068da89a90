# Independent float64 forwards of the HF model families gpt2, bert and llama, written from the HF modeling
# code's equations (GPT2LMHeadModel, BertForSequenceClassification, BertForMaskedLM, LlamaForCausalLM), with
# the pieces other families reuse (layer_norm, rms_norm, softmax_attention, causal_loss, ...) and FORWARDS,
# each family's forward over a case's inputs.
import math

import torch
import torch.nn.functional as F


# ---- reference forwards (float64), from the HF modeling equations ---------------------------------
NEG = torch.finfo(torch.float64).min


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def softmax_attention(q, k, v, mask_bias, causal):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    T = q.shape[-2]
    if causal:
        future = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        scores = scores.masked_fill(future, NEG)
    if mask_bias is not None:
        scores = scores + mask_bias
    scores = scores - scores.max(-1, keepdim=True).values
    p = scores.exp()
    return (p / p.sum(-1, keepdim=True)) @ v


def padding_bias(attention_mask):
    if attention_mask is None:
        return None
    return (1.0 - attention_mask.double())[:, None, None, :] * NEG


def causal_loss(logits, labels):
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=-100)


def gpt2_forward(cfg, W, ids, mask):
    g = lambda n: W[n].double()
    B, T = ids.shape
    C, H = cfg["n_embd"], cfg["n_head"]
    pre = "transformer."
    x = g(pre + "wte.weight")[ids] + g(pre + "wpe.weight")[torch.arange(T)]
    bias = padding_bias(mask)
    for i in range(cfg["n_layer"]):
        p = pre + "h.%d." % i
        h = layer_norm(x, g(p + "ln_1.weight"), g(p + "ln_1.bias"), cfg["layer_norm_epsilon"])
        qkv = h @ g(p + "attn.c_attn.weight") + g(p + "attn.c_attn.bias")  # Conv1D: x W + b, W [in, out]
        q, k, v = [t.view(B, T, H, C // H).transpose(1, 2) for t in qkv.split(C, -1)]
        y = softmax_attention(q, k, v, bias, True).transpose(1, 2).reshape(B, T, C)
        x = x + y @ g(p + "attn.c_proj.weight") + g(p + "attn.c_proj.bias")
        h = layer_norm(x, g(p + "ln_2.weight"), g(p + "ln_2.bias"), cfg["layer_norm_epsilon"])
        h = gelu_new(h @ g(p + "mlp.c_fc.weight") + g(p + "mlp.c_fc.bias"))
        x = x + h @ g(p + "mlp.c_proj.weight") + g(p + "mlp.c_proj.bias")
    x = layer_norm(x, g(pre + "ln_f.weight"), g(pre + "ln_f.bias"), cfg["layer_norm_epsilon"])
    head = g("lm_head.weight") if not cfg.get("tie_word_embeddings", True) else g(pre + "wte.weight")
    return x @ head.T


def bert_encoder(cfg, W, ids, mask, types, pooler):
    g = lambda n: W[n].double()
    B, T = ids.shape
    C, H, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    e = "bert.embeddings."
    x = g(e + "word_embeddings.weight")[ids] + g(e + "token_type_embeddings.weight")[types] + \
        g(e + "position_embeddings.weight")[torch.arange(T)]
    x = layer_norm(x, g(e + "LayerNorm.weight"), g(e + "LayerNorm.bias"), eps)
    bias = padding_bias(mask)
    lin = lambda t, n: t @ g(n + ".weight").T + g(n + ".bias")
    for i in range(cfg["num_hidden_layers"]):
        p = "bert.encoder.layer.%d." % i
        heads = lambda t: t.view(B, T, H, C // H).transpose(1, 2)
        q, k, v = (heads(lin(x, p + "attention.self." + n)) for n in ("query", "key", "value"))
        ctx = softmax_attention(q, k, v, bias, False).transpose(1, 2).reshape(B, T, C)
        a = layer_norm(lin(ctx, p + "attention.output.dense") + x, g(p + "attention.output.LayerNorm.weight"),
                       g(p + "attention.output.LayerNorm.bias"), eps)
        m = gelu_erf(lin(a, p + "intermediate.dense"))
        x = layer_norm(lin(m, p + "output.dense") + a, g(p + "output.LayerNorm.weight"), g(p + "output.LayerNorm.bias"), eps)
    pooled = torch.tanh(lin(x[:, 0], "bert.pooler.dense")) if pooler else None
    return x, pooled


def bert_cls_forward(cfg, W, ids, mask, types):
    _, pooled = bert_encoder(cfg, W, ids, mask, types, True)
    return pooled @ W["classifier.weight"].double().T + W["classifier.bias"].double()


def bert_mlm_forward(cfg, W, ids, mask, types):
    g = lambda n: W[n].double()
    x, _ = bert_encoder(cfg, W, ids, mask, types, False)
    t = "cls.predictions.transform."
    h = gelu_erf(x @ g(t + "dense.weight").T + g(t + "dense.bias"))
    h = layer_norm(h, g(t + "LayerNorm.weight"), g(t + "LayerNorm.bias"), cfg["layer_norm_eps"])
    return h @ g("bert.embeddings.word_embeddings.weight").T + g("cls.predictions.bias")


def rms_norm(x, w, eps):
    return w * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))


def llama_forward(cfg, W, ids, mask, tables=None):
    """tables(cfg, T, D) -> (cos, sin) [T, D]: the rotary tables (rope_reference.py's scaled ones); default
    unscaled rope_theta."""
    g = lambda n: W[n].double()
    B, T = ids.shape
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    D = C // H
    eps = cfg["rms_norm_eps"]
    if tables:
        cos, sin = tables(cfg, T, D)
    else:
        inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
        cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()

    def rope(t):  # rotate_half convention: (x1, x2) -> (-x2, x1) on the two halves
        x1, x2 = t[..., :D // 2], t[..., D // 2:]
        return t * cos + torch.cat([-x2, x1], -1) * sin

    x = g("model.embed_tokens.weight")[ids]
    bias = padding_bias(mask)
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        h = rms_norm(x, g(p + "input_layernorm.weight"), eps)
        q = (h @ g(p + "self_attn.q_proj.weight").T).view(B, T, H, D).transpose(1, 2)
        k = (h @ g(p + "self_attn.k_proj.weight").T).view(B, T, KV, D).transpose(1, 2)
        v = (h @ g(p + "self_attn.v_proj.weight").T).view(B, T, KV, D).transpose(1, 2)
        q, k = rope(q), rope(k)
        # query head j uses key/value head j // (H / KV)
        k = torch.stack([k[:, j // (H // KV)] for j in range(H)], 1)
        v = torch.stack([v[:, j // (H // KV)] for j in range(H)], 1)
        y = softmax_attention(q, k, v, bias, True).transpose(1, 2).reshape(B, T, H * D)
        x = x + y @ g(p + "self_attn.o_proj.weight").T
        h = rms_norm(x, g(p + "post_attention_layernorm.weight"), eps)
        gate = h @ g(p + "mlp.gate_proj.weight").T
        x = x + (gate * torch.sigmoid(gate) * (h @ g(p + "mlp.up_proj.weight").T)) @ g(p + "mlp.down_proj.weight").T
    x = rms_norm(x, g("model.norm.weight"), eps)
    head = g("model.embed_tokens.weight") if cfg.get("tie_word_embeddings", False) else g("lm_head.weight")
    return x @ head.T


FORWARDS = {
    "gpt2": lambda c, W, i: gpt2_forward(c, W, i["input_ids"], i.get("attention_mask")),
    "bert": lambda c, W, i: bert_cls_forward(c, W, i["input_ids"], i["attention_mask"], i["token_type_ids"]),
    "bert_mlm": lambda c, W, i: bert_mlm_forward(c, W, i["input_ids"], i["attention_mask"], i["token_type_ids"]),
    "llama": lambda c, W, i: llama_forward(c, W, i["input_ids"], i.get("attention_mask")),
}
