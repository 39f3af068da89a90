// `t5` model (see t5.h). Follows HF's T5 equations: scores q k^T without 1/sqrt(d) scaling, plus the
// relative position bias (bidirectional buckets in the encoder, causal in the decoder, exact up to
// num_buckets / 2 and log-spaced up to max_distance) taken from the first block's embedding and shared by
// every block of the stack, plus HF's additive masks (finfo.min); softmax in float32; RMS norms in
// float32 without mean or bias; pre-norm residual sublayers with dropout; the tied head scales the
// decoder output by d_model^-0.5. Initialisation is HF's T5 _init_weights with initializer_factor.
#include "models/t5.h"
#include "models/construction.h"

#include <cmath>
#include <tuple>

#include "models/checkpointing.h"
#include "models/fused_embedding.h"
#include "models/fused_norms.h"
#include "models/hf_layers.h"
#include "models/packed_seq2seq.h"
#include "util/error.h"
#include "util/strings.h"

namespace hftrain {

void T5::Options::declare(Schema<Options>& s) {
  s.add("vocab_size", &Options::vocab_size, "Vocabulary size; 0 = from the data's tokenizer.").min(0);
  s.add("d_model", &Options::d_model, "Hidden size.").min(1);
  s.add("d_kv", &Options::d_kv, "Size of each attention head's keys, queries and values.").min(1);
  s.add("d_ff", &Options::d_ff, "Feed-forward inner size.").min(1);
  s.add("num_layers", &Options::num_layers, "Number of encoder blocks.").min(1);
  s.add("num_decoder_layers", &Options::num_decoder_layers, "Number of decoder blocks; null = num_layers.");
  s.add("num_heads", &Options::num_heads, "Attention heads per attention layer.").min(1);
  s.add("relative_attention_num_buckets", &Options::relative_attention_num_buckets,
        "Relative position buckets (the encoder's are split between the two directions).")
      .min(2);
  s.add("relative_attention_max_distance", &Options::relative_attention_max_distance,
        "Distance beyond which relative positions share the last bucket.")
      .min(1);
  s.add("dropout_rate", &Options::dropout_rate, "Dropout on embeddings, attention probabilities and residual branches.")
      .min(0)
      .max(1);
  s.add("layer_norm_epsilon", &Options::layer_norm_epsilon, "Epsilon of the RMS layer norms.").greater_than(0);
  s.add("initializer_factor", &Options::initializer_factor, "Scale of HF's T5 initialisation (1.0 as in HF).")
      .greater_than(0);
  s.add("feed_forward_proj", &Options::feed_forward_proj,
        "Feed-forward type: relu (T5 v1.0), gated-gelu (T5 v1.1, gelu_new), or [gated-]<activation>.");
  s.add("tie_word_embeddings", &Options::tie_word_embeddings,
        "lm_head shares the token embedding (`shared`); the decoder output is then scaled by d_model^-0.5.");
  s.add("pad_token_id", &Options::pad_token_id, "Padding token (replaces -100 in the shifted labels).").min(0);
  s.add("eos_token_id", &Options::eos_token_id, "End-of-sequence token.").min(0);
  s.add("decoder_start_token_id", &Options::decoder_start_token_id, "First decoder input token.").min(0);
}

namespace {

AdaptableLinear linear(int64_t in, int64_t out) {
  return new_linear(in, out, false);
}

// HF T5Config: "gated-<act>" or "<act>"; "gated-gelu" means gelu_new. Returns {activation, gated}.
std::pair<std::string, bool> parse_feed_forward_proj(const std::string& proj) {
  const auto dash = proj.find('-');
  const bool gated = dash != std::string::npos && proj.substr(0, dash) == "gated";
  const std::string act = dash == std::string::npos ? proj : proj.substr(dash + 1);
  if ((dash != std::string::npos && !gated) || act.find('-') != std::string::npos || act.empty())
    throw ConfigError("model.feed_forward_proj: '" + proj +
                      "' is not a valid activation function of the dense layer; use `gated-{ACT_FN}` or `{ACT_FN}`, "
                      "e.g. 'gated-gelu' or 'relu'");
  check_activation(act, "model.feed_forward_proj");
  return {proj == "gated-gelu" ? "gelu_new" : act, gated};
}

// The options with the data's vocabulary filled in, checked.
T5::Options resolved(T5::Options o, const ModelContext& context) {
  resolve_lm_sizes({o.vocab_size, nullptr, nullptr}, context);
  if (o.num_decoder_layers && *o.num_decoder_layers < 1)
    throw ConfigError("model.num_decoder_layers: " + std::to_string(*o.num_decoder_layers) + " (at least 1, or null)");
  parse_feed_forward_proj(o.feed_forward_proj);
  for (const auto& [key, id] : {std::pair<const char*, int64_t>{"pad_token_id", o.pad_token_id},
                                {"eos_token_id", o.eos_token_id},
                                {"decoder_start_token_id", o.decoder_start_token_id}})
    if (id >= o.vocab_size)
      throw ConfigError(std::string("model.") + key + " (" + std::to_string(id) + ") is outside the vocabulary (" +
                        std::to_string(o.vocab_size) + " tokens)");
  return o;
}

// HF T5Attention._relative_position_bucket on relative positions (memory - query), in HF's float32 math.
torch::Tensor relative_position_bucket(torch::Tensor relative_position, bool bidirectional, int64_t num_buckets,
                                       int64_t max_distance) {
  auto buckets = torch::zeros_like(relative_position);
  if (bidirectional) {
    num_buckets /= 2;
    buckets = buckets + relative_position.gt(0).to(torch::kLong) * num_buckets;
    relative_position = relative_position.abs();
  } else {
    relative_position = -torch::clamp_max(relative_position, 0);
  }
  const int64_t max_exact = num_buckets / 2;
  auto is_small = relative_position.lt(max_exact);
  auto large = torch::log(relative_position.to(torch::kFloat) / static_cast<double>(max_exact)) /
               std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)) *
               static_cast<double>(num_buckets - max_exact);
  // log(0) = -inf where the position is small; those entries are never selected (where below).
  large = torch::where(is_small, torch::zeros_like(large), large);
  auto if_large = torch::clamp_max(max_exact + large.to(torch::kLong), num_buckets - 1);
  return buckets + torch::where(is_small, relative_position, if_large);
}

}  // namespace

struct T5::Attention : torch::nn::Module {
  Attention(const Options& o, bool relative_bias) : o(o) {
    const int64_t inner = o.num_heads * o.d_kv;
    q = register_module("q", linear(o.d_model, inner));
    k = register_module("k", linear(o.d_model, inner));
    v = register_module("v", linear(o.d_model, inner));
    out = register_module("o", linear(inner, o.d_model));
    if (relative_bias)
      bias_embedding = register_module("relative_attention_bias",
                                       new_embedding(o.relative_attention_num_buckets, o.num_heads));
  }

  torch::Tensor heads(const torch::Tensor& t) const {
    return t.view({t.size(0), t.size(1), o.num_heads, o.d_kv}).transpose(1, 2);
  }

  // HF compute_bias for queries at positions [q_start, q_start + q_len) and keys [0, k_len): [1, H, q, k].
  torch::Tensor position_bias(int64_t q_start, int64_t q_len, int64_t k_len, bool bidirectional) {
    auto lopts = torch::TensorOptions().dtype(torch::kLong).device(bias_embedding->weight.device());
    auto context = torch::arange(q_start, q_start + q_len, lopts).unsqueeze(1);
    auto memory = torch::arange(k_len, lopts).unsqueeze(0);
    auto buckets = relative_position_bucket(memory - context, bidirectional, o.relative_attention_num_buckets,
                                            o.relative_attention_max_distance);
    return apply_embedding(bias_embedding, buckets).permute({2, 0, 1}).unsqueeze(0);
  }

  // softmax(q(x) k^T + bias) v, projected by o: k_all / v_all [B, H, Tk, d_kv] are the keys and values
  // (of x itself, the cache, or the encoder output).
  // A padding-free row's bias is segmented: each example attends within itself (packed_seq2seq.h).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& k_all, const torch::Tensor& v_all,
                        const AttentionBias& bias, bool training) {
    auto block = [&](const torch::Tensor& qh, const torch::Tensor& kh, const torch::Tensor& vh, const torch::Tensor& b) {
      auto scores = torch::matmul(qh, kh.transpose(-2, -1));
      if (b.defined()) scores = scores + b;
      auto probs = torch::softmax(scores.to(torch::kFloat), -1).to(scores.scalar_type());
      if (training && o.dropout_rate > 0) probs = torch::dropout(probs, o.dropout_rate, true);
      return torch::matmul(probs, vh);
    };
    auto y = attend_by_segments(heads(q(x)), k_all, v_all, bias, block).transpose(1, 2).contiguous();
    return out(y.view({x.size(0), x.size(1), o.num_heads * o.d_kv}));
  }

  Options o;
  AdaptableLinear q{nullptr}, k{nullptr}, v{nullptr}, out{nullptr};
  torch::nn::Embedding bias_embedding{nullptr};
};

struct T5::FeedForward : torch::nn::Module {
  FeedForward(const Options& o, const std::string& act, bool gated) : o(o), act(act), gated(gated) {
    if (gated) {
      wi_0 = register_module("wi_0", linear(o.d_model, o.d_ff));
      wi_1 = register_module("wi_1", linear(o.d_model, o.d_ff));
    } else {
      wi = register_module("wi", linear(o.d_model, o.d_ff));
    }
    wo = register_module("wo", linear(o.d_ff, o.d_model));
  }

  torch::Tensor forward(const torch::Tensor& x, bool training) {
    auto h = gated ? apply_activation(act, wi_0(x)) * wi_1(x) : apply_activation(act, wi(x));
    return wo(torch::dropout(h, o.dropout_rate, training));
  }

  Options o;
  std::string act;
  bool gated;
  AdaptableLinear wi{nullptr}, wi_0{nullptr}, wi_1{nullptr}, wo{nullptr};
};

// One T5Block: layer.0 self-attention, (decoder) layer.1 cross-attention, then the feed-forward layer,
// each a pre-norm residual sublayer.
struct T5::Block : torch::nn::Module {
  Block(const Options& o, bool decoder, bool relative_bias, const std::string& act, bool gated) : o(o), decoder(decoder) {
    auto layer = register_module("layer", std::make_shared<torch::nn::Module>());
    auto l0 = layer->register_module("0", std::make_shared<torch::nn::Module>());
    self_attn = l0->register_module("SelfAttention", std::make_shared<Attention>(o, relative_bias));
    self_norm = l0->register_module("layer_norm", std::make_shared<torch::nn::Module>())
                    ->register_parameter("weight", torch::ones({o.d_model}, parameter_options()));
    if (decoder) {
      auto l1 = layer->register_module("1", std::make_shared<torch::nn::Module>());
      cross_attn = l1->register_module("EncDecAttention", std::make_shared<Attention>(o, false));
      cross_norm = l1->register_module("layer_norm", std::make_shared<torch::nn::Module>())
                       ->register_parameter("weight", torch::ones({o.d_model}, parameter_options()));
    }
    auto lf = layer->register_module(decoder ? "2" : "1", std::make_shared<torch::nn::Module>());
    ff = lf->register_module("DenseReluDense", std::make_shared<FeedForward>(o, act, gated));
    ff_norm = lf->register_module("layer_norm", std::make_shared<torch::nn::Module>())
                  ->register_parameter("weight", torch::ones({o.d_model}, parameter_options()));
  }

  // `self_bias`: position bias + mask for self-attention; `memory` / `cross_bias`: the encoder output
  // and its padding mask (decoder); `cache`: cached generation (self keys / values appended, cross
  // keys / values computed once) for decoder block `index`.
  torch::Tensor forward(const torch::Tensor& x, const AttentionBias& self_bias, const torch::Tensor& memory,
                        const AttentionBias& cross_bias, KvCache* cache = nullptr, std::size_t index = 0) {
    const bool train = is_training();
    auto drop = [&](const torch::Tensor& t) { return torch::dropout(t, o.dropout_rate, train); };
    auto h = rms_norm(x, self_norm, o.layer_norm_epsilon);
    auto k = self_attn->heads(self_attn->k(h)), v = self_attn->heads(self_attn->v(h));
    if (cache) std::tie(k, v) = cache->append(index, k, v);
    // Each residual add fused with the norm that reads its sum (models/fused_norms.h).
    auto [y, normed] = add_rms_norm(x, drop(self_attn->forward(h, k, v, self_bias, train)),
                                    decoder ? cross_norm : ff_norm, o.layer_norm_epsilon);
    if (decoder) {
      auto [ck, cv] = cross_attention_kv(cache, index, [&] {
        return std::make_pair(cross_attn->heads(cross_attn->k(memory)), cross_attn->heads(cross_attn->v(memory)));
      });
      std::tie(y, normed) = add_rms_norm(y, drop(cross_attn->forward(normed, ck, cv, cross_bias, train)), ff_norm,
                                         o.layer_norm_epsilon);
    }
    return y + drop(ff->forward(normed, train));
  }

  Options o;
  bool decoder;
  std::shared_ptr<Attention> self_attn, cross_attn;
  std::shared_ptr<FeedForward> ff;
  torch::Tensor self_norm, cross_norm, ff_norm;
};

ModelDimensions T5::facts(const Options& o) {
  return {o.d_model, o.num_layers + o.num_decoder_layers.value_or(o.num_layers), o.num_heads};
}

// HF stores the tied embedding once, as shared.weight; some files carry encoder/decoder.embed_tokens copies
// (or only those), and lm_head.weight when tied.
const ModelFamily& T5::declaration() {
  static const ModelFamily family = [] {
    ModelFamily f;
    f.type = f.model_type = "t5";
    f.architectures = {"T5ForConditionalGeneration", "T5Model"};
    f.lora_target_modules = {"q", "v"};
    f.load.ignored_unexpected = {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight"};
    f.load.initialised_if_missing = {"lm_head."};
    f.load.aliases = {{"encoder.embed_tokens.weight", "shared.weight"}, {"decoder.embed_tokens.weight", "shared.weight"}};
    return f;
  }();
  return family;
}

void T5::declare_units() {
  // Every block of a stack reads the position bias of the stack's first block.
  for (const bool decoder : {false, true}) {
    const std::string stack = decoder ? "decoder." : "encoder.";
    const std::string bias = stack + "block.0.layer.0.SelfAttention.relative_attention_bias.";
    (decoder ? decoder_embed_unit_ : encoder_embed_unit_) = declare_unit(stack + "embed_tokens", {"shared.weight"});
    const int64_t n = decoder ? decoder_layers_ : options_.num_layers;
    for (int64_t i = 0; i < n; ++i)
      (decoder ? decoder_block_units_ : encoder_block_units_)
          .push_back(declare_unit(stack + "block." + std::to_string(i), {stack + "block." + std::to_string(i) + ".", bias}));
    if (!decoder) encoder_norm_unit_ = declare_unit("encoder.final_layer_norm", {"encoder.final_layer_norm."});
  }
  head_unit_ = declare_unit("head", {"decoder.final_layer_norm.", options_.tie_word_embeddings ? "shared.weight" : "lm_head.weight"});
}

T5::T5(const Options& options, const ModelContext& context) : options_(resolved(options, context)) {
  auto& o = options_;
  decoder_layers_ = o.num_decoder_layers.value_or(o.num_layers);
  std::tie(dense_act_fn_, gated_) = parse_feed_forward_proj(o.feed_forward_proj);
  declare_family(declaration(), options_, [this](nlohmann::json& j) {
    j["num_decoder_layers"] = decoder_layers_;
    j["dense_act_fn"] = dense_act_fn_;
    j["is_gated_act"] = gated_;
    j["is_encoder_decoder"] = true;
    j["use_cache"] = true;
  });
  declare_units();
  checkpoint_fns_ = std::make_shared<CheckpointFunctions>();

  shared_ = register_module("shared", new_embedding(o.vocab_size, o.d_model));
  release_built_parameters(*shared_);  // sharded construction: one unit's memory at a time
  for (const bool decoder : {false, true}) {
    auto stack = register_module(decoder ? "decoder" : "encoder", std::make_shared<torch::nn::Module>());
    auto block = stack->register_module("block", std::make_shared<torch::nn::Module>());
    auto& blocks = decoder ? decoder_blocks_ : encoder_blocks_;
    const int64_t n = decoder ? decoder_layers_ : o.num_layers;
    for (int64_t i = 0; i < n; ++i) {
      blocks.push_back(block->register_module(std::to_string(i), std::make_shared<Block>(o, decoder, i == 0, dense_act_fn_, gated_)));
      release_built_parameters(*blocks.back());
    }
    (decoder ? decoder_norm_ : encoder_norm_) = stack->register_module("final_layer_norm", std::make_shared<torch::nn::Module>())
                                                    ->register_parameter("weight", torch::ones({o.d_model}, parameter_options()));
  }
  if (!o.tie_word_embeddings)
    lm_head_ = register_module("lm_head", std::make_shared<torch::nn::Module>())
                   ->register_parameter("weight", torch::empty({o.vocab_size, o.d_model}, parameter_options()));

  // HF T5PreTrainedModel._init_weights (factor = initializer_factor): norms factor; shared / lm_head
  // N(0, factor); q N(0, factor (d_model d_kv)^-0.5), k / v / relative bias / wi N(0, factor d_model^-0.5),
  // o N(0, factor (heads d_kv)^-0.5), wo N(0, factor d_ff^-0.5).
  InitPass pass;
  pass.selects = [](const std::string&) { return true; };
  const double f = o.initializer_factor, dm = static_cast<double>(o.d_model), dkv = static_cast<double>(o.d_kv);
  const double heads = static_cast<double>(o.num_heads), dff = static_cast<double>(o.d_ff);
  pass.init = [=](const std::string& name, torch::Tensor& p) {
    auto ends = [&](std::string_view suffix) { return ends_with(name, suffix); };
    if (ends("layer_norm.weight"))
      p.fill_(f);
    else if (name == "shared.weight" || name == "lm_head.weight")
      p.normal_(0.0, f);
    else if (ends(".q.weight"))
      p.normal_(0.0, f / std::sqrt(dm * dkv));
    else if (ends(".k.weight") || ends(".v.weight") || ends("relative_attention_bias.weight") || ends(".wi.weight") ||
             ends(".wi_0.weight") || ends(".wi_1.weight"))
      p.normal_(0.0, f / std::sqrt(dm));
    else if (ends(".o.weight"))
      p.normal_(0.0, f / std::sqrt(heads * dkv));
    else if (ends(".wo.weight"))
      p.normal_(0.0, f / std::sqrt(dff));
    else
      throw RuntimeFailure("t5: no initialisation rule for parameter '" + name + "'");
  };
  initialise_parameters({pass});
}

torch::Tensor T5::shift_right(const torch::Tensor& labels) const {
  return shift_tokens_right(labels, options_.pad_token_id, options_.decoder_start_token_id);
}

torch::Tensor T5::embed(UnitHandle unit, const torch::Tensor& ids) {
  return in_unit(unit, [&] {
    // HF's NEFTune hook on the input embedding: each call of `shared`
    auto e = add_neftune_noise(apply_embedding(shared_, ids), is_training() ? neftune_noise_alpha_ : 0.0);
    return torch::dropout(e, options_.dropout_rate, is_training());
  });
}

torch::Tensor T5::encode(const torch::Tensor& input_ids, const torch::Tensor& attention_mask, const Batch* packed) {
  const int64_t S = input_ids.size(1);
  auto x = embed(encoder_embed_unit_, input_ids);
  // HF get_extended_attention_mask: (1 - mask) * finfo.min, added to the position bias. A packed row
  // attends within each source, with the source's own position bias.
  const torch::Tensor padding = packed ? torch::Tensor() : padding_bias(attention_mask, x.scalar_type());
  Attention* relative = encoder_blocks_.front()->self_attn.get();
  for (std::size_t i = 0; i < encoder_blocks_.size(); ++i) {
    Block* b = encoder_blocks_[i].get();
    auto body = [this, b, relative, padding, packed, S, i](const torch::Tensor& in) {
      return in_unit(encoder_block_units_[i], [&] {
        const auto dtype = in.scalar_type();
        AttentionBias bias;
        if (packed) {
          bias.query_segments = bias.key_segments = packed->packed_lengths;
          bias.per_segment = [relative, dtype](int64_t q, int64_t k) {
            return relative->position_bias(0, q, k, /*bidirectional=*/true).to(dtype);
          };
        } else {
          bias.full = relative->position_bias(0, S, S, /*bidirectional=*/true).to(dtype);
          if (padding.defined()) bias.full = bias.full + padding;
        }
        return b->forward(in, bias, {}, {});
      });
    };
    x = gradient_checkpointing_ && is_training() ? checkpointed(checkpoint_fns_->hold(body, 4 * encoder_blocks_.size()), x)
                                                 : body(x);
  }
  return in_unit(encoder_norm_unit_, [&] {
    return torch::dropout(rms_norm(x, encoder_norm_, options_.layer_norm_epsilon), options_.dropout_rate, is_training());
  });
}

torch::Tensor T5::decode(const torch::Tensor& ids, const torch::Tensor& decoder_mask, const torch::Tensor& memory,
                         const torch::Tensor& encoder_mask, KvCache* cache, const Batch* packed) {
  const int64_t T = ids.size(1), past = cache ? cache->length : 0, K = past + T;
  auto x = embed(decoder_embed_unit_, ids);
  const auto dtype = x.scalar_type();
  const torch::Tensor causal = packed ? torch::Tensor() : causal_bias(T, past, decoder_mask, dtype, x.device());
  AttentionBias cross = packed ? AttentionBias() : AttentionBias(padding_bias(encoder_mask, dtype));
  if (packed) {  // each target attends to its own source only (no position bias in cross-attention)
    cross.query_segments = packed->packed_label_lengths;
    cross.key_segments = packed->packed_lengths;
  }
  Attention* relative = decoder_blocks_.front()->self_attn.get();
  for (std::size_t i = 0; i < decoder_blocks_.size(); ++i) {
    Block* b = decoder_blocks_[i].get();
    const UnitHandle unit = decoder_block_units_[i];
    auto body = [this, b, relative, causal, cross, packed, past, T, K, unit, cache, i](const torch::Tensor& in,
                                                                                    const torch::Tensor& mem) {
      return in_unit(unit, [&] {
        const auto dtype = in.scalar_type();
        AttentionBias bias;
        if (packed) {  // causal within each target, with the target's own position bias
          bias.query_segments = bias.key_segments = packed->packed_label_lengths;
          bias.per_segment = [relative, dtype, device = in.device()](int64_t q, int64_t k) {
            return relative->position_bias(0, q, k, /*bidirectional=*/false).to(dtype) + causal_bias(q, k - q, {}, dtype, device);
          };
        } else {
          bias.full = relative->position_bias(past, T, K, /*bidirectional=*/false).to(dtype) + causal;
        }
        return b->forward(in, bias, mem, cross, cache, i);
      });
    };
    x = gradient_checkpointing_ && is_training() && !cache
            ? checkpointed(checkpoint_fns_->hold(body, 4 * decoder_blocks_.size()), x, memory)
            : body(x, memory);
  }
  if (cache) cache->length += T;
  return x;
}

Model::LmHead T5::head(const torch::Tensor& hidden) {
  auto h = torch::dropout(rms_norm(hidden, decoder_norm_, options_.layer_norm_epsilon), options_.dropout_rate,
                          is_training());
  if (options_.tie_word_embeddings) h = h * std::pow(static_cast<double>(options_.d_model), -0.5);
  return {h, options_.tie_word_embeddings ? shared_->weight : lm_head_, {}};
}

torch::Tensor T5::lm_logits(const torch::Tensor& hidden) {
  return head_logits(head_unit_, [&] { return head(hidden); });
}

ModelOutput T5::forward(const Batch& batch) {
  require_seq2seq_labels(batch, "t5");
  const Batch* packed = is_packed_seq2seq(batch) ? &batch : nullptr;  // training.padding_free
  auto memory = encode(batch.input_ids, batch.attention_mask, packed);
  const torch::Tensor decoder_inputs = decoder_input_ids(batch, options_.pad_token_id, options_.decoder_start_token_id);
  const torch::Tensor hidden = decode(decoder_inputs, {}, memory, batch.attention_mask, nullptr, packed);
  return language_model_output(head_unit_, batch, /*shift=*/false, [&] { return head(hidden); });
}

torch::Tensor T5::forward_encoder_decoder_cached(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                                 const torch::Tensor& decoder_input_ids, KvCache& cache) {
  if (!cache.encoder_hidden.defined()) {
    cache.encoder_hidden = encode(input_ids, attention_mask);
    cache.encoder_mask = attention_mask;
  }
  return lm_logits(decode(decoder_input_ids, {}, cache.encoder_hidden, cache.encoder_mask, &cache));
}

}  // namespace hftrain
