# Random HF-layout configs and weights for the gpt2, bert and llama families (HF tensor names, drawn in a
# fixed order from a torch.Generator) and the inputs of causal-LM cases; the model directories of
# hf_models_reference.py and of the scripts that build on these families.
import torch

from hf_reference_harness import rand


def gpt2_weights(gen, V, C, P, layers):
    """Random GPT2LMHeadModel weights (HF names, Conv1D [in, out] layout), drawn in a fixed order."""
    W = {"transformer.wte.weight": rand(gen, V, C), "transformer.wpe.weight": rand(gen, P, C)}
    for i in range(layers):
        p = "transformer.h.%d." % i
        W[p + "ln_1.weight"], W[p + "ln_1.bias"] = rand(gen, C, std=0.1, mean=1.0), rand(gen, C, std=0.1)
        W[p + "attn.c_attn.weight"], W[p + "attn.c_attn.bias"] = rand(gen, C, 3 * C), rand(gen, 3 * C, std=0.1)
        W[p + "attn.c_proj.weight"], W[p + "attn.c_proj.bias"] = rand(gen, C, C), rand(gen, C, std=0.1)
        W[p + "ln_2.weight"], W[p + "ln_2.bias"] = rand(gen, C, std=0.1, mean=1.0), rand(gen, C, std=0.1)
        W[p + "mlp.c_fc.weight"], W[p + "mlp.c_fc.bias"] = rand(gen, C, 4 * C), rand(gen, 4 * C, std=0.1)
        W[p + "mlp.c_proj.weight"], W[p + "mlp.c_proj.bias"] = rand(gen, 4 * C, C, std=0.15), rand(gen, C, std=0.1)
    W["transformer.ln_f.weight"], W["transformer.ln_f.bias"] = rand(gen, C, std=0.1, mean=1.0), rand(gen, C, std=0.1)
    return W


def gpt2_case(gen, prefix, extra_buffers):
    cfg = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 37, "n_positions": 24,
           "n_ctx": 24, "n_embd": 32, "n_layer": 2, "n_head": 4, "n_inner": None, "activation_function": "gelu_new",
           "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1, "layer_norm_epsilon": 1e-5,
           "initializer_range": 0.02, "bos_token_id": 0, "eos_token_id": 0, "transformers_version": "4.40.0"}
    W = gpt2_weights(gen, V=37, C=32, P=24, layers=2)
    file_tensors = {}
    for k, t in W.items():
        file_tensors[k[len("transformer."):] if not prefix else k] = t
    if extra_buffers:  # old GPT-2 files carry the causal-mask buffers, which HF ignores when loading
        for i in range(2):
            file_tensors["h.%d.attn.bias" % i] = torch.tril(torch.ones(1, 1, 24, 24))
            file_tensors["h.%d.attn.masked_bias" % i] = torch.tensor(-1e4)
    return cfg, W, file_tensors


def bert_weights(gen, cfg, pooler):
    C, V, I = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    W = {"bert.embeddings.word_embeddings.weight": rand(gen, V, C),
         "bert.embeddings.position_embeddings.weight": rand(gen, cfg["max_position_embeddings"], C),
         "bert.embeddings.token_type_embeddings.weight": rand(gen, 2, C),
         "bert.embeddings.LayerNorm.weight": rand(gen, C, std=0.1, mean=1.0),
         "bert.embeddings.LayerNorm.bias": rand(gen, C, std=0.1)}
    for i in range(cfg["num_hidden_layers"]):
        p = "bert.encoder.layer.%d." % i
        for n in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            W[p + n + ".weight"], W[p + n + ".bias"] = rand(gen, C, C), rand(gen, C, std=0.1)
        W[p + "intermediate.dense.weight"], W[p + "intermediate.dense.bias"] = rand(gen, I, C), rand(gen, I, std=0.1)
        W[p + "output.dense.weight"], W[p + "output.dense.bias"] = rand(gen, C, I), rand(gen, C, std=0.1)
        for n in ("attention.output.LayerNorm", "output.LayerNorm"):
            W[p + n + ".weight"], W[p + n + ".bias"] = rand(gen, C, std=0.1, mean=1.0), rand(gen, C, std=0.1)
    if pooler:
        W["bert.pooler.dense.weight"], W["bert.pooler.dense.bias"] = rand(gen, C, C), rand(gen, C, std=0.1)
    return W


def bert_config(arch, **extra):
    cfg = {"model_type": "bert", "architectures": [arch], "vocab_size": 41, "hidden_size": 32, "num_hidden_layers": 2,
           "num_attention_heads": 4, "intermediate_size": 48, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
           "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 24, "type_vocab_size": 2,
           "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0,
           "position_embedding_type": "absolute", "transformers_version": "4.40.0"}
    cfg.update(extra)
    return cfg


def bert_cls_case(gen):
    """BertForSequenceClassification with 3 labels from id2label, random weights and classifier, and a batch
    of 3 rows with token types and padding: (config, weights, inputs)."""
    cfg = bert_config("BertForSequenceClassification",
                      id2label={"0": "neg", "1": "neu", "2": "pos"}, label2id={"neg": 0, "neu": 1, "pos": 2})
    W = bert_weights(gen, cfg, True)
    W["classifier.weight"], W["classifier.bias"] = rand(gen, 3, 32), rand(gen, 3, std=0.1)
    ids = torch.randint(1, 41, (3, 10), generator=gen)
    types = torch.zeros(3, 10, dtype=torch.int64)
    types[:, 5:] = 1
    mask = torch.ones(3, 10, dtype=torch.int64)
    mask[1, 7:] = 0
    mask[2, 4:] = 0
    return cfg, W, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types, "labels": torch.tensor([2, 0, 1])}


def llama_case(gen, tie, kv_heads, theta):
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 43, "hidden_size": 32,
           "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": kv_heads,
           "hidden_act": "silu", "max_position_embeddings": 24, "initializer_range": 0.02, "rms_norm_eps": 1e-5,
           "rope_theta": theta, "rope_scaling": None, "tie_word_embeddings": tie, "attention_bias": False,
           "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32", "transformers_version": "4.40.0"}
    C, V, I, D = 32, 43, 48, 8
    W = {"model.embed_tokens.weight": rand(gen, V, C, std=0.5)}
    for i in range(2):
        p = "model.layers.%d." % i
        W[p + "input_layernorm.weight"] = rand(gen, C, std=0.1, mean=1.0)
        W[p + "self_attn.q_proj.weight"] = rand(gen, 4 * D, C)
        W[p + "self_attn.k_proj.weight"] = rand(gen, kv_heads * D, C)
        W[p + "self_attn.v_proj.weight"] = rand(gen, kv_heads * D, C)
        W[p + "self_attn.o_proj.weight"] = rand(gen, C, 4 * D)
        W[p + "post_attention_layernorm.weight"] = rand(gen, C, std=0.1, mean=1.0)
        W[p + "mlp.gate_proj.weight"] = rand(gen, I, C)
        W[p + "mlp.up_proj.weight"] = rand(gen, I, C)
        W[p + "mlp.down_proj.weight"] = rand(gen, C, I)
    W["model.norm.weight"] = rand(gen, C, std=0.1, mean=1.0)
    if not tie:
        W["lm_head.weight"] = rand(gen, V, C)
    return cfg, W


def lm_inputs(gen, V, T=12):
    ids = torch.randint(1, V, (2, T), generator=gen)
    mask = torch.ones(2, T, dtype=torch.int64)
    mask[1, 8:] = 0  # right padding in the second row
    labels = ids.clone()
    labels[1, 8:] = -100
    return ids, mask, labels

