// `bart` model (see bart.h). Each stack embeds tokens (times sqrt(d_model) with scale_embedding) plus the
// learned position row position + 2, normalises the sum with layernorm_embedding and applies dropout.
// Layers are post-LN: x = LayerNorm(x + dropout(sublayer(x))) for self-attention, (decoder)
// cross-attention and the fc1 -> activation -> activation_dropout -> fc2 feed-forward. Attention is
// softmax(q k^T / sqrt(head_dim) + mask) v with HF's additive masks (finfo.min): padded source keys in
// the encoder and the cross-attention, causal in the decoder's self-attention. The logits are
// lm_head(x) + final_logits_bias. Initialisation is HF's BART _init_weights (init_std; the padding row of
// the token embedding zero; LayerNorms 1 / 0).
#include "models/bart.h"
#include "models/construction.h"
#include "models/fused_embedding.h"
#include "models/fused_norms.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "models/checkpointing.h"
#include "models/hf_layers.h"
#include "models/packed_seq2seq.h"
#include "util/error.h"

namespace hftrain {

namespace {

// BART's learned positions start at row 2 (rows 0 and 1 are never read).
constexpr int64_t kPositionOffset = 2;

}  // namespace

void Bart::Options::declare(Schema<Options>& s) {
  s.add("vocab_size", &Options::vocab_size, "Vocabulary size; 0 = from the data's tokenizer.").min(0);
  s.add("d_model", &Options::d_model, "Hidden size.").min(1);
  s.add("encoder_layers", &Options::encoder_layers, "Number of encoder layers.").min(1);
  s.add("decoder_layers", &Options::decoder_layers, "Number of decoder layers.").min(1);
  s.add("encoder_attention_heads", &Options::encoder_attention_heads, "Attention heads per encoder layer (divide d_model).")
      .min(1);
  s.add("decoder_attention_heads", &Options::decoder_attention_heads,
        "Attention heads of each decoder self- and cross-attention (divide d_model).")
      .min(1);
  s.add("encoder_ffn_dim", &Options::encoder_ffn_dim, "Feed-forward inner size of the encoder layers.").min(1);
  s.add("decoder_ffn_dim", &Options::decoder_ffn_dim, "Feed-forward inner size of the decoder layers.").min(1);
  s.add("activation_function", &Options::activation_function,
        "Feed-forward activation (HF ACT2FN name: gelu, gelu_new, gelu_pytorch_tanh, relu, silu, swish).");
  s.add("dropout", &Options::dropout, "Dropout on the embeddings and on each sublayer's output.").min(0).max(1);
  s.add("attention_dropout", &Options::attention_dropout, "Dropout on the attention probabilities.").min(0).max(1);
  s.add("activation_dropout", &Options::activation_dropout, "Dropout after the feed-forward activation.").min(0).max(1);
  s.add("encoder_layerdrop", &Options::encoder_layerdrop, "LayerDrop of the encoder; only 0 is supported.").min(0).max(1);
  s.add("decoder_layerdrop", &Options::decoder_layerdrop, "LayerDrop of the decoder; only 0 is supported.").min(0).max(1);
  s.add("max_position_embeddings", &Options::max_position_embeddings,
        "Longest source or target; each stack's position table has this many rows plus BART's offset of 2.")
      .min(1);
  s.add("init_std", &Options::init_std, "Standard deviation of HF's initialisation of linear and embedding weights.")
      .greater_than(0);
  s.add("scale_embedding", &Options::scale_embedding, "Multiply the token embeddings by sqrt(d_model).");
  s.add("tie_word_embeddings", &Options::tie_word_embeddings, "lm_head shares the token embedding (model.shared).");
  s.add("pad_token_id", &Options::pad_token_id, "Padding token (its embedding row starts at zero; replaces -100 in the "
                                                "shifted labels).")
      .min(0);
  s.add("bos_token_id", &Options::bos_token_id, "Beginning-of-sequence token (recorded in config.json).").min(0);
  s.add("eos_token_id", &Options::eos_token_id, "End-of-sequence token.").min(0);
  s.add("decoder_start_token_id", &Options::decoder_start_token_id, "First decoder input token.").min(0);
  s.add("forced_eos_token_id", &Options::forced_eos_token_id,
        "HF's forced end-of-sequence token: generation forces it at the length limit unless "
        "generation.forced_eos_token_id says otherwise (HF GenerationConfig.from_model_config).")
      .min(0);
  s.add("normalize_before", &Options::normalize_before, "Pre-LayerNorm layers (mBART); only false is supported.");
  s.add("add_final_layer_norm", &Options::add_final_layer_norm, "A LayerNorm after each stack (mBART); only false is supported.");
  s.add("normalize_embedding", &Options::normalize_embedding, "layernorm_embedding after the embeddings; only true is supported.");
  s.add("static_position_embeddings", &Options::static_position_embeddings,
        "Sinusoidal positions (Marian); only false (learned positions) is supported.");
  s.add("add_bias_logits", &Options::add_bias_logits, "A bias of the output projection; only false is supported.");
}

namespace {

// The options with the data's vocabulary filled in, checked.
Bart::Options resolved(Bart::Options o, const ModelContext& context) {
  resolve_lm_sizes({o.vocab_size, nullptr, nullptr}, context);
  check_activation(o.activation_function, "model.activation_function");
  for (const auto& [key, heads] : {std::pair<const char*, int64_t>{"encoder_attention_heads", o.encoder_attention_heads},
                                   {"decoder_attention_heads", o.decoder_attention_heads}})
    resolve_lm_sizes({o.vocab_size, nullptr, nullptr, o.d_model, heads, "d_model", key}, context);
  for (const auto& [key, p] : {std::pair<const char*, double>{"encoder_layerdrop", o.encoder_layerdrop},
                               {"decoder_layerdrop", o.decoder_layerdrop}})
    if (p != 0.0)
      throw ConfigError(std::string("model.") + key + ": LayerDrop is not implemented for bart (set it to 0)");
  const std::pair<const char*, bool> unsupported[] = {
      {"normalize_before: true (pre-LayerNorm layers, mBART style)", o.normalize_before},
      {"add_final_layer_norm: true (a LayerNorm after each stack, mBART style)", o.add_final_layer_norm},
      {"normalize_embedding: false (no layernorm_embedding)", !o.normalize_embedding},
      {"static_position_embeddings: true (sinusoidal positions)", o.static_position_embeddings},
      {"add_bias_logits: true", o.add_bias_logits}};
  for (const auto& [what, set] : unsupported)
    if (set) throw ConfigError(std::string("model.") + what + " is not supported by hftrain's bart");
  for (const auto& [key, id] : {std::pair<const char*, int64_t>{"pad_token_id", o.pad_token_id},
                                {"bos_token_id", o.bos_token_id},
                                {"eos_token_id", o.eos_token_id},
                                {"decoder_start_token_id", o.decoder_start_token_id},
                                {"forced_eos_token_id", o.forced_eos_token_id}})
    if (id >= o.vocab_size)
      throw ConfigError(std::string("model.") + key + " (" + std::to_string(id) + ") is outside the vocabulary (" +
                        std::to_string(o.vocab_size) + " tokens)");
  resolve_lm_sizes({o.vocab_size, &o.max_position_embeddings, "max_position_embeddings"}, context);  // the data fits
  return o;
}

torch::nn::LayerNorm layer_norm(int64_t d) { return new_layer_norm(d, 1e-5); }

// A padding-free row's attention: query segment i to key segment i, causal within it when `causal`.
AttentionBias segments(const std::vector<int64_t>& queries, const std::vector<int64_t>& keys, bool causal,
                       const torch::Tensor& like) {
  AttentionBias bias;
  bias.query_segments = queries;
  bias.key_segments = keys;
  if (causal)
    bias.per_segment = [dtype = like.scalar_type(), device = like.device()](int64_t q, int64_t k) {
      return causal_bias(q, k - q, {}, dtype, device);
    };
  return bias;
}

}  // namespace

struct Bart::Attention : torch::nn::Module {
  Attention(int64_t d_model, int64_t heads, double dropout) : num_heads(heads), dropout(dropout) {
    k_proj = register_module("k_proj", new_linear(d_model, d_model));  // HF's registration order
    v_proj = register_module("v_proj", new_linear(d_model, d_model));
    q_proj = register_module("q_proj", new_linear(d_model, d_model));
    out_proj = register_module("out_proj", new_linear(d_model, d_model));
  }

  torch::Tensor heads(const torch::Tensor& t) const {
    return t.view({t.size(0), t.size(1), num_heads, t.size(2) / num_heads}).transpose(1, 2);
  }

  // out_proj(softmax(q(x) k^T / sqrt(head_dim) + bias) v) for keys / values [B, H, Tk, head_dim] (of x
  // itself, the cache, or the encoder output); a padding-free row's bias is segmented (packed_seq2seq.h).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& k_all, const torch::Tensor& v_all,
                        const AttentionBias& bias, bool training) {
    const double p = training ? dropout : 0.0;
    auto block = [p](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& b) {
      return attend(q, k, v, b, /*causal=*/false, p);
    };
    auto y = attend_by_segments(heads(q_proj(x)), k_all, v_all, bias, block);
    return out_proj(y.transpose(1, 2).contiguous().view({x.size(0), x.size(1), x.size(2)}));
  }

  int64_t num_heads;
  double dropout;
  AdaptableLinear k_proj{nullptr}, v_proj{nullptr}, q_proj{nullptr}, out_proj{nullptr};
};

// One BartEncoderLayer / BartDecoderLayer (post-LN residual sublayers).
struct Bart::Layer : torch::nn::Module {
  Layer(const Options& o, bool decoder) : o(o), decoder(decoder) {
    const int64_t d = o.d_model, heads = decoder ? o.decoder_attention_heads : o.encoder_attention_heads;
    const int64_t ffn = decoder ? o.decoder_ffn_dim : o.encoder_ffn_dim;
    self_attn = register_module("self_attn", std::make_shared<Attention>(d, heads, o.attention_dropout));
    self_attn_layer_norm = register_module("self_attn_layer_norm", layer_norm(d));
    if (decoder) {
      encoder_attn = register_module("encoder_attn", std::make_shared<Attention>(d, heads, o.attention_dropout));
      encoder_attn_layer_norm = register_module("encoder_attn_layer_norm", layer_norm(d));
    }
    fc1 = register_module("fc1", new_linear(d, ffn));
    fc2 = register_module("fc2", new_linear(ffn, d));
    final_layer_norm = register_module("final_layer_norm", layer_norm(d));
  }

  // `self_bias`: the self-attention mask; `memory` / `cross_bias`: the encoder output and its padding
  // mask (decoder); `cache`: cached generation (self keys / values appended, cross keys / values computed
  // once) for decoder layer `index`.
  torch::Tensor forward(const torch::Tensor& x, const AttentionBias& self_bias, const torch::Tensor& memory,
                        const AttentionBias& cross_bias, KvCache* cache = nullptr, std::size_t index = 0) {
    const bool train = is_training();
    auto drop = [&](const torch::Tensor& t) { return torch::dropout(t, o.dropout, train); };
    auto k = self_attn->heads(self_attn->k_proj(x)), v = self_attn->heads(self_attn->v_proj(x));
    if (cache) std::tie(k, v) = cache->append(index, k, v);
    // Post-LN: each residual add fused with the norm of its sum (models/fused_norms.h).
    auto h = add_layer_norm(self_attn_layer_norm, x, drop(self_attn->forward(x, k, v, self_bias, train))).second;
    if (decoder) {
      auto [ck, cv] = cross_attention_kv(cache, index, [&] {
        return std::make_pair(encoder_attn->heads(encoder_attn->k_proj(memory)),
                              encoder_attn->heads(encoder_attn->v_proj(memory)));
      });
      h = add_layer_norm(encoder_attn_layer_norm, h, drop(encoder_attn->forward(h, ck, cv, cross_bias, train))).second;
    }
    auto f = torch::dropout(apply_activation(o.activation_function, fc1(h)), o.activation_dropout, train);
    return add_layer_norm(final_layer_norm, h, drop(fc2(f))).second;
  }

  Options o;
  bool decoder;
  std::shared_ptr<Attention> self_attn, encoder_attn;
  torch::nn::LayerNorm self_attn_layer_norm{nullptr}, encoder_attn_layer_norm{nullptr}, final_layer_norm{nullptr};
  AdaptableLinear fc1{nullptr}, fc2{nullptr};
};

ModelDimensions Bart::facts(const Options& o) {
  return {o.d_model, o.encoder_layers + o.decoder_layers, std::max(o.encoder_attention_heads, o.decoder_attention_heads)};
}

// BartForConditionalGeneration files name everything under model. (BartModel files without it); the
// embedding is stored once as model.shared.weight, with or without the embed_tokens copies.
const ModelFamily& Bart::declaration() {
  static const ModelFamily family = [] {
    ModelFamily f;
    f.type = f.model_type = "bart";
    f.architectures = {"BartForConditionalGeneration", "BartModel"};
    f.lora_target_modules = {"q_proj", "v_proj"};
    f.load.base_prefix = "model.";
    f.load.ignored_unexpected = {".embed_tokens.weight", "lm_head.weight"};
    f.load.initialised_if_missing = {"lm_head.", "final_logits_bias"};
    f.load.aliases = {{"model.encoder.embed_tokens.weight", "model.shared.weight"},
                      {"model.decoder.embed_tokens.weight", "model.shared.weight"}};
    return f;
  }();
  return family;
}

Bart::Bart(const Options& options, const ModelContext& context) : options_(resolved(options, context)) {
  const auto& o = options_;
  declare_family(declaration(), options_, [this](nlohmann::json& j) {
    j["num_hidden_layers"] = options_.encoder_layers;
    j["is_encoder_decoder"] = true;
    j["use_cache"] = true;
  });
  for (const bool decoder : {false, true}) {  // ZeRO-3's gather units, in forward order
    const std::string stack = decoder ? "model.decoder." : "model.encoder.";
    embed_units_[decoder] =
        declare_unit(stack + "embeddings", {"model.shared.weight", stack + "embed_positions.", stack + "layernorm_embedding."});
    for (int64_t i = 0; i < (decoder ? o.decoder_layers : o.encoder_layers); ++i)
      layer_units_[decoder].push_back(declare_unit(stack + "layers." + std::to_string(i), {stack + "layers." + std::to_string(i) + "."}));
  }
  head_unit_ = declare_unit("lm_head", {o.tie_word_embeddings ? "model.shared.weight" : "lm_head.weight"});
  checkpoint_fns_ = std::make_shared<CheckpointFunctions>();
  auto model = register_module("model", std::make_shared<torch::nn::Module>());
  shared_ = model->register_module("shared", new_embedding(o.vocab_size, o.d_model));
  release_built_parameters(*shared_);  // sharded construction: one unit's memory at a time
  for (const bool decoder : {false, true}) {
    auto stack = model->register_module(decoder ? "decoder" : "encoder", std::make_shared<torch::nn::Module>());
    positions_[decoder] = stack->register_module(
        "embed_positions", new_embedding(o.max_position_embeddings + kPositionOffset, o.d_model));
    release_built_parameters(*positions_[decoder]);
    auto layers = stack->register_module("layers", std::make_shared<torch::nn::Module>());
    auto& list = decoder ? decoder_layers_ : encoder_layers_;
    const int64_t n = decoder ? o.decoder_layers : o.encoder_layers;
    for (int64_t i = 0; i < n; ++i) {
      list.push_back(layers->register_module(std::to_string(i), std::make_shared<Layer>(o, decoder)));
      release_built_parameters(*list.back());
    }
    embedding_norms_[decoder] = stack->register_module("layernorm_embedding", layer_norm(o.d_model));
    release_built_parameters(*embedding_norms_[decoder]);
  }
  if (!o.tie_word_embeddings)
    lm_head_ = register_module("lm_head", std::make_shared<torch::nn::Module>())
                   ->register_parameter("weight", torch::empty({o.vocab_size, o.d_model}, parameter_options()));
  final_logits_bias_ = register_buffer("final_logits_bias", torch::zeros({1, o.vocab_size}, parameter_options()));

  // HF BartPreTrainedModel._init_weights: Linear / Embedding weights N(0, init_std), biases 0, the
  // padding row of the token embedding 0; LayerNorm weights 1, biases 0.
  InitPass pass = hf_init_pass(o.init_std, {"layer_norm", "layernorm_embedding"});
  pass.init = [base = pass.init, pad = o.pad_token_id](const std::string& name, torch::Tensor& p) {
    base(name, p);
    if (name == "model.shared.weight") p[pad].zero_();
  };
  initialise_parameters({pass});
}

torch::Tensor Bart::shift_right(const torch::Tensor& labels) const {
  return shift_tokens_right(labels, options_.pad_token_id, options_.decoder_start_token_id);
}

torch::Tensor Bart::embed(bool decoder, const torch::Tensor& ids, int64_t past, const std::vector<int64_t>* segments) {
  return in_unit(embed_units_[decoder], [&] {
    const int64_t T = ids.size(1);
    const int64_t extent = segments && !segments->empty() ? *std::max_element(segments->begin(), segments->end()) : past + T;
    if (extent > options_.max_position_embeddings)
      throw RuntimeFailure(std::string("bart: the ") + (decoder ? "decoder" : "encoder") + " reads " +
                           std::to_string(extent) + " positions, more than max_position_embeddings (" +
                           std::to_string(options_.max_position_embeddings) + ")");
    auto e = apply_embedding(shared_, ids);
    if (options_.scale_embedding) e = e * std::sqrt(static_cast<double>(options_.d_model));
    e = add_neftune_noise(e, is_training() ? neftune_noise_alpha_ : 0.0);  // HF's hook on the input embedding
    auto rows = segments ? restarting_positions(*segments, ids.device()) + kPositionOffset
                         : torch::arange(past + kPositionOffset, past + T + kPositionOffset,
                                         torch::TensorOptions().dtype(torch::kLong).device(ids.device()));
    auto h = apply_layer_norm(embedding_norms_[decoder], e + apply_embedding(positions_[decoder], rows));
    return torch::dropout(h, options_.dropout, is_training());
  });
}

torch::Tensor Bart::encode(const torch::Tensor& input_ids, const torch::Tensor& attention_mask, const Batch* packed) {
  auto x = embed(false, input_ids, 0, packed ? &packed->packed_lengths : nullptr);
  AttentionBias padding(padding_bias(attention_mask, x.scalar_type()));
  if (packed) padding = segments(packed->packed_lengths, packed->packed_lengths, false, x);
  for (std::size_t i = 0; i < encoder_layers_.size(); ++i) {
    Layer* l = encoder_layers_[i].get();
    auto body = [this, l, padding, i](const torch::Tensor& in) {
      return in_unit(layer_units_[0][i], [&] { return l->forward(in, padding, {}, {}); });
    };
    x = gradient_checkpointing_ && is_training() ? checkpointed(checkpoint_fns_->hold(body, 4 * encoder_layers_.size()), x)
                                                 : body(x);
  }
  return x;
}

torch::Tensor Bart::decode(const torch::Tensor& ids, const torch::Tensor& memory, const torch::Tensor& encoder_mask,
                           KvCache* cache, const Batch* packed) {
  const int64_t T = ids.size(1), past = cache ? cache->length : 0;
  auto x = embed(true, ids, past, packed ? &packed->packed_label_lengths : nullptr);
  const auto dtype = x.scalar_type();
  const AttentionBias causal = packed ? segments(packed->packed_label_lengths, packed->packed_label_lengths, true, x)
                                      : AttentionBias(causal_bias(T, past, {}, dtype, x.device()));
  const AttentionBias cross = packed ? segments(packed->packed_label_lengths, packed->packed_lengths, false, x)
                                     : AttentionBias(padding_bias(encoder_mask, dtype));
  for (std::size_t i = 0; i < decoder_layers_.size(); ++i) {
    Layer* l = decoder_layers_[i].get();
    auto body = [this, l, causal, cross, cache, unit = layer_units_[1][i], i](const torch::Tensor& in, const torch::Tensor& mem) {
      return in_unit(unit, [&] { return l->forward(in, causal, mem, cross, cache, i); });
    };
    x = gradient_checkpointing_ && is_training() && !cache
            ? checkpointed(checkpoint_fns_->hold(body, 4 * decoder_layers_.size()), x, memory)
            : body(x, memory);
  }
  if (cache) cache->length += T;
  return x;
}

Model::LmHead Bart::head(const torch::Tensor& hidden) {
  return {hidden, options_.tie_word_embeddings ? shared_->weight : lm_head_, final_logits_bias_.view({-1})};
}

torch::Tensor Bart::lm_logits(const torch::Tensor& hidden) {
  return head_logits(head_unit_, [&] { return head(hidden); });
}

ModelOutput Bart::forward(const Batch& batch) {
  require_seq2seq_labels(batch, "bart");
  const Batch* packed = is_packed_seq2seq(batch) ? &batch : nullptr;  // training.padding_free
  auto memory = encode(batch.input_ids, batch.attention_mask, packed);
  const torch::Tensor decoder_inputs = decoder_input_ids(batch, options_.pad_token_id, options_.decoder_start_token_id);
  const torch::Tensor hidden = decode(decoder_inputs, memory, batch.attention_mask, nullptr, packed);
  return language_model_output(head_unit_, batch, /*shift=*/false, [&] { return head(hidden); });
}

torch::Tensor Bart::forward_encoder_decoder_cached(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                                   const torch::Tensor& decoder_input_ids, KvCache& cache) {
  if (!cache.encoder_hidden.defined()) {
    cache.encoder_hidden = encode(input_ids, attention_mask);
    cache.encoder_mask = attention_mask;
  }
  return lm_logits(decode(decoder_input_ids, cache.encoder_hidden, cache.encoder_mask, &cache));
}

}  // namespace hftrain
