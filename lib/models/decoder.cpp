// The shared llama-like decoder (see decoder.h). Follows HF's eager LlamaAttention: q/k rotated with cos/sin
// of position * inv_freq (models/rotary: rope_theta and the rope_scaling type, halves duplicated,
// rotate_half), k/v heads repeated num_attention_heads / num_key_value_heads times, causal + padding mask
// (+ the sliding window), softmax in float32; RMSNorm before each sublayer (gemma: times 1 + weight, in float32;
// gemma2: also after the attention and around the MLP); down(act(gate(x)) * up(x)).
#include "models/decoder.h"

#include <cmath>
#include <limits>
#include <tuple>

#include "models/checkpointing.h"
#include "models/construction.h"
#include "models/fused_activations.h"
#include "models/fused_embedding.h"
#include "models/fused_norms.h"
#include "models/fused_rotary.h"
#include "models/hf_layers.h"
#include "models/sequence_parallel.h"
#include "util/error.h"

namespace hftrain {

std::string check_rope_scaling_option(const RopeScaling& r) {
  RopeParameters p;
  std::string problem = read_rope_parameters(r.value, p);  // "rope_scaling.factor: ..." -> "factor: ..."
  if (problem.rfind("rope_scaling.", 0) == 0) return problem.substr(13);
  return problem.rfind("rope_scaling: ", 0) == 0 ? problem.substr(14) : problem;
}

DecoderSpec resolve_decoder(DecoderOptions& o, const ModelContext& context, double partial_rotary_factor) {
  resolve_lm_sizes({o.vocab_size, &o.max_position_embeddings, "max_position_embeddings", o.hidden_size,
                    o.num_attention_heads, o.head_dim ? nullptr : "hidden_size", "num_attention_heads",
                    /*data_must_fit=*/false},
                   context);
  DecoderSpec s;
  s.kv_heads = o.num_key_value_heads.value_or(o.num_attention_heads);
  if (s.kv_heads <= 0 || o.num_attention_heads % s.kv_heads != 0)
    throw ConfigError("model.num_key_value_heads (" + std::to_string(s.kv_heads) + ") must divide num_attention_heads (" +
                      std::to_string(o.num_attention_heads) + ")");
  s.head_dim = o.head_dim.value_or(o.hidden_size / o.num_attention_heads);
  if (s.head_dim <= 0 || s.head_dim % 2 != 0)
    throw ConfigError("model.head_dim (" + std::to_string(s.head_dim) + ") must be a positive even number (rotary halves)");
  check_activation(o.hidden_act, "model.hidden_act");
  const auto rotary_dim = static_cast<int64_t>(static_cast<double>(s.head_dim) * partial_rotary_factor);
  if (rotary_dim <= 0 || rotary_dim % 2 != 0)
    throw ConfigError("model.partial_rotary_factor: " + std::to_string(partial_rotary_factor) + " of head_dim " +
                      std::to_string(s.head_dim) + " gives " + std::to_string(rotary_dim) +
                      " rotary dims (a positive even number is needed)");
  s.rope = make_rope_spec(o.rope_theta, o.rope_scaling, rotary_dim, o.max_position_embeddings, "model.");
  s.vocab_size = o.vocab_size;
  s.hidden_size = o.hidden_size;
  s.intermediate_size = o.intermediate_size;
  s.layers = o.num_hidden_layers;
  s.heads = o.num_attention_heads;
  s.max_positions = o.max_position_embeddings;
  s.hidden_act = o.hidden_act;
  s.rms_norm_eps = o.rms_norm_eps;
  s.initializer_range = o.initializer_range;
  s.attention_dropout = o.attention_dropout;
  s.windows.assign(static_cast<std::size_t>(o.num_hidden_layers), 0);
  s.tie_word_embeddings = o.tie_word_embeddings;
  return s;
}

std::vector<int64_t> qwen_layer_windows(int64_t layers, bool use_sliding_window, std::optional<int64_t> window,
                                        int64_t max_window_layers, const std::optional<std::vector<std::string>>& layer_types) {
  if (layer_types && static_cast<int64_t>(layer_types->size()) != layers)
    throw ConfigError("model.layer_types: " + std::to_string(layer_types->size()) + " entries for " + std::to_string(layers) +
                      " layers");
  std::vector<int64_t> windows(static_cast<std::size_t>(layers), 0);
  for (int64_t i = 0; i < layers; ++i) {
    const std::string type = layer_types ? (*layer_types)[static_cast<std::size_t>(i)]
                                         : (i >= max_window_layers ? "sliding_attention" : "full_attention");
    if (type != "sliding_attention" && type != "full_attention")
      throw ConfigError("model.layer_types: '" + type + "' is not built (full_attention, sliding_attention)");
    if (type == "full_attention" || !use_sliding_window) continue;
    if (!window || *window <= 0)
      throw ConfigError("model.sliding_window: use_sliding_window is true but no positive window is given");
    windows[static_cast<std::size_t>(i)] = *window;
  }
  return windows;
}

ModelFamily decoder_family(const std::string& type, const std::string& stem) {
  ModelFamily f;
  f.type = f.model_type = type;
  f.architectures = {stem + "ForCausalLM", stem + "Model"};
  f.lora_target_modules = {"q_proj", "v_proj"};
  f.rotary = true;  // rope_scaling / rope_parameters read and checked by runspec/rope_scaling
  f.strict_config_keys = true;
  f.load.base_prefix = "model.";
  f.load.ignored_unexpected = {".rotary_emb.inv_freq", "lm_head.weight"};
  return f;
}

void RotaryDecoder::decoder_config(nlohmann::json& j, const DecoderSpec& spec, const DecoderOptions& o) {
  j["num_key_value_heads"] = spec.kv_heads;
  j["head_dim"] = spec.head_dim;
  j["rope_scaling"] = rope_scaling_json(o.rope_scaling);
  j["rope_parameters"] = rope_parameters_json(o.rope_theta, o.rope_scaling);
}

GatedMlp::GatedMlp(int64_t hidden, int64_t intermediate, const std::string& hidden_act, bool bias, bool fused_gate_up)
    : intermediate_(intermediate), act_(hidden_act) {
  if (fused_gate_up) {
    gate_up_proj_ = register_module("gate_up_proj", new_linear(hidden, 2 * intermediate, bias));
  } else {
    gate_proj_ = register_module("gate_proj", new_linear(hidden, intermediate, bias));
    up_proj_ = register_module("up_proj", new_linear(hidden, intermediate, bias));
  }
  down_proj_ = register_module("down_proj", new_linear(intermediate, hidden, bias));
}

torch::Tensor GatedMlp::forward(const torch::Tensor& x) {
  torch::Tensor gate, up;
  if (gate_up_proj_) {  // gate rows first, then up
    const auto gu = gate_up_proj_(x);
    gate = gu.narrow(-1, 0, intermediate_).contiguous();
    up = gu.narrow(-1, intermediate_, intermediate_).contiguous();
  } else {
    gate = gate_proj_(x), up = up_proj_(x);
  }
  const bool silu = act_ == "silu" || act_ == "swish";
  return down_proj_(silu ? silu_gated(gate, up) : apply_activation(act_, gate) * up);
}

namespace {

// The family's RMSNorm of x: weight * normalised x, or gemma's x normalised times (1 + weight), computed in float32
// and then rounded to x's dtype, as HF's GemmaRMSNorm / Gemma2RMSNorm.
torch::Tensor norm(const DecoderSpec& s, const torch::Tensor& x, const torch::Tensor& weight) {
  if (!s.norm_plus_one) return rms_norm(x, weight, s.rms_norm_eps);
  if (x.scalar_type() == torch::kFloat && weight.scalar_type() == torch::kFloat)
    return rms_norm(x, weight + 1.0, s.rms_norm_eps);
  return rms_norm(x.to(torch::kFloat), weight.to(torch::kFloat) + 1.0, s.rms_norm_eps).to(x.scalar_type());
}

// The residual add and the norm after it, {x + update, norm(x + update)}: one fused pass (add_rms_norm), but for
// gemma's norms over another dtype than float32, which norm() computes in float32.
std::pair<torch::Tensor, torch::Tensor> add_norm(const DecoderSpec& s, const torch::Tensor& x, const torch::Tensor& update,
                                                 const torch::Tensor& weight) {
  if (s.norm_plus_one && (x.scalar_type() != torch::kFloat || weight.scalar_type() != torch::kFloat)) {
    const torch::Tensor r = x + update;
    return {r, norm(s, r, weight)};
  }
  return add_rms_norm(x, update, s.norm_plus_one ? weight + 1.0 : weight, s.rms_norm_eps);
}

torch::Tensor norm_weight(torch::nn::Module& parent, const std::string& name, int64_t size) {
  return parent.register_module(name, std::make_shared<torch::nn::Module>())
      ->register_parameter("weight", torch::ones({size}, parameter_options()));
}

// The sliding window as an additive bias [Tq, Tk] over the keys a query may not see any more: query i (at
// position Tk - Tq + i) sees key j when j > its position - window, i.e. `window` keys, itself included
// (transformers' current masking_utils; the older _make_causal_mask allowed window + 1). Undefined when
// every key is inside the window.
torch::Tensor window_bias(int64_t Tq, int64_t Tk, int64_t window, const torch::TensorOptions& options) {
  if (window <= 0 || Tk <= window) return {};
  auto q = torch::arange(Tk - Tq, Tk, options.dtype(torch::kLong)).unsqueeze(1);
  auto k = torch::arange(Tk, options.dtype(torch::kLong)).unsqueeze(0);
  return torch::zeros({Tq, Tk}, options).masked_fill(k.le(q - window), -std::numeric_limits<float>::infinity());
}

}  // namespace

struct RotaryDecoder::Layer : torch::nn::Module {
  Layer(const DecoderSpec& s, int64_t index) : s(s), window(s.windows[static_cast<std::size_t>(index)]) {
    input_norm = norm_weight(*this, "input_layernorm", s.hidden_size);
    auto attn = register_module("self_attn", std::make_shared<torch::nn::Module>());
    if (s.fused_qkv) {
      qkv_proj = attn->register_module("qkv_proj", new_linear(s.hidden_size, (s.heads + 2 * s.kv_heads) * s.head_dim, s.q_bias));
    } else {
      q_proj = attn->register_module("q_proj", new_linear(s.hidden_size, s.heads * s.head_dim, s.q_bias));
      k_proj = attn->register_module("k_proj", new_linear(s.hidden_size, s.kv_heads * s.head_dim, s.k_bias));
      v_proj = attn->register_module("v_proj", new_linear(s.hidden_size, s.kv_heads * s.head_dim, s.v_bias));
    }
    o_proj = attn->register_module("o_proj", new_linear(s.heads * s.head_dim, s.hidden_size, s.o_bias));
    if (s.qk_norm) {
      q_norm = norm_weight(*attn, "q_norm", s.head_dim);
      k_norm = norm_weight(*attn, "k_norm", s.head_dim);
    }
    post_norm = norm_weight(*this, "post_attention_layernorm", s.hidden_size);
    if (s.sandwich_norms) {
      pre_ff_norm = norm_weight(*this, "pre_feedforward_layernorm", s.hidden_size);
      post_ff_norm = norm_weight(*this, "post_feedforward_layernorm", s.hidden_size);
    }
    FeedForwardChoice ff = s.feed_forward
                               ? s.feed_forward(s, index)
                               : FeedForwardChoice{"mlp", std::make_shared<GatedMlp>(s.hidden_size, s.intermediate_size,
                                                                                    s.hidden_act, s.mlp_bias, s.fused_gate_up)};
    mlp = register_module(ff.name, ff.block);
  }

  // `segments`: a padding-free row's example lengths (attention inside each); empty = one example per row.
  // `sp`: x is a slice of each row, attention runs over the whole rows through the sequence-parallel group.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        const torch::Tensor& bias, const std::vector<int64_t>& segments, KvCache* cache = nullptr,
                        std::size_t layer = 0, const SequenceParallel* sp = nullptr) {
    const auto B = x.size(0), T = x.size(1);
    auto h = norm(s, x, input_norm);
    auto heads = [&](const torch::Tensor& t, int64_t n, const torch::Tensor& head_norm) {
      auto v = t.reshape({B, T, n, s.head_dim});
      if (head_norm.defined()) v = norm(s, v, head_norm);  // per head, before rotary
      return v.transpose(1, 2);
    };
    torch::Tensor qp, kp, vp;
    if (s.fused_qkv) {  // q rows first, then k, then v
      const auto qkv = qkv_proj(h);
      qp = qkv.narrow(-1, 0, s.heads * s.head_dim).contiguous();
      kp = qkv.narrow(-1, s.heads * s.head_dim, s.kv_heads * s.head_dim).contiguous();
      vp = qkv.narrow(-1, (s.heads + s.kv_heads) * s.head_dim, s.kv_heads * s.head_dim).contiguous();
    } else {
      qp = q_proj(h), kp = k_proj(h), vp = v_proj(h);
    }
    auto q = apply_rotary(heads(qp, s.heads, q_norm), cos, sin);  // over the first cos.size(-1) dims of each head
    auto k = apply_rotary(heads(kp, s.kv_heads, k_norm), cos, sin);
    auto v = heads(vp, s.kv_heads, {});
    torch::Tensor y;
    if (sp) {  // Ulysses: the whole sequence for this rank's share of the heads, rotated at the global positions
      const std::string what = "sequence parallel attention of layer " + std::to_string(layer);
      y = sp->to_sequence(attention(sp->to_heads(q, what), sp->to_heads(k, what), sp->to_heads(v, what), bias, segments,
                                    nullptr, layer),
                          what);
    } else {
      y = attention(q, k, v, bias, segments, cache, layer);
    }
    y = y.transpose(1, 2).contiguous().view({B, T, s.heads * s.head_dim});
    if (s.sandwich_norms) {  // gemma2: x + norm(attn), then + post_ff_norm(mlp(pre_ff_norm(.)))
      auto [r, m] = add_norm(s, x, norm(s, o_proj(y), post_norm), pre_ff_norm);
      return r + norm(s, feed_forward(m), post_ff_norm);
    }
    auto [r, m] = add_norm(s, x, o_proj(y), post_norm);
    return r + feed_forward(m);
  }

  // The attention of q [B, h, T, D] and k / v [B, kv, T, D] (any share of the heads) through the one dispatch, with
  // the layer's sliding window.
  torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& bias,
                          const std::vector<int64_t>& segments, KvCache* cache, std::size_t layer) {
    const int64_t T = q.size(2);
    const double dropout = is_training() ? s.attention_dropout : 0.0;
    const ScoreRule rule{s.attention_scale, s.attn_logit_softcap};
    torch::Tensor y;
    if (window > 0 && (cache || segments.empty())) {
      const int64_t keys = (cache ? cache->length : 0) + T;
      torch::Tensor w = window_bias(T, keys, window, q.options());
      y = self_attention(q, k, v, w.defined() ? (bias.defined() ? bias + w : w) : bias, {}, dropout, cache, layer, rule);
    } else if (window > 0) {  // a padding-free row: each example with its own window
      std::vector<torch::Tensor> parts;
      int64_t start = 0;
      for (const int64_t n : segments) {
        auto piece = [&](const torch::Tensor& t) { return t.narrow(2, start, n); };
        parts.push_back(self_attention(piece(q), piece(k), piece(v), window_bias(n, n, window, q.options()), {}, dropout,
                                       nullptr, layer, rule));
        start += n;
      }
      y = torch::cat(parts, 2);
    } else {
      y = self_attention(q, k, v, bias, segments, dropout, cache, layer, rule);
    }
    return y;
  }

  // The feed-forward block, over slices of the sequence when tiled (training.tiled_mlp).
  torch::Tensor feed_forward(const torch::Tensor& m) {
    if (mlp_tiles < 0) return mlp->forward(m);
    return tiled_over_tokens(mlp_fn, m, mlp_tiles > 0 ? mlp_tiles : auto_token_tiles(m.size(1), s.hidden_size));
  }

  DecoderSpec s;
  int64_t window;
  torch::Tensor input_norm, post_norm, q_norm, k_norm, pre_ff_norm, post_ff_norm;
  AdaptableLinear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, qkv_proj{nullptr}, o_proj{nullptr};
  std::shared_ptr<FeedForward> mlp;
  int64_t mlp_tiles = -1;  // tiled_mlp: slices per sequence (0 = automatic); -1 = the whole sequence at once
  std::function<torch::Tensor(const torch::Tensor&)> mlp_fn = [this](const torch::Tensor& t) { return mlp->forward(t); };
};

void RotaryDecoder::enable_tiled_mlp(int64_t tiles) {
  if (spec_.feed_forward)  // a router's logits are recorded per forward, in the batch's token order
    throw ConfigError("training.tiled_mlp: the routed experts of " + family()->model_type + " are not tiled");
  for (auto& layer : layers_) layer->mlp_tiles = tiles;
}

void RotaryDecoder::set_sequence_parallel(std::shared_ptr<SequenceParallel> group) {
  if (spec_.feed_forward)  // a router's load-balancing loss is a product of token shares over the whole batch
    throw ConfigError("distributed.sequence_parallel_size: the routed experts of " + family()->model_type +
                      " are not sequence parallel (their load-balancing loss is over every token of the batch)");
  if (const std::string problem = group->heads_problem(spec_.heads, spec_.kv_heads); !problem.empty())
    throw ConfigError(problem + " (model type " + family()->model_type + ")");
  sequence_parallel_ = std::move(group);
}

void RotaryDecoder::build(const DecoderSpec& spec) {
  spec_ = spec;
  const auto& s = spec_;
  checkpoint_fns_ = std::make_shared<CheckpointFunctions>();
  embeddings_unit_ = declare_unit("embeddings", {"model.embed_tokens."});
  for (int64_t i = 0; i < s.layers; ++i)
    layer_units_.push_back(declare_unit("model.layers." + std::to_string(i), {"model.layers." + std::to_string(i) + "."}));
  head_unit_ = declare_unit("head", {"model.norm.", s.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"});

  auto model = register_module("model", std::make_shared<torch::nn::Module>());
  embed_tokens_ = model->register_module("embed_tokens", new_embedding(s.vocab_size, s.hidden_size));
  release_built_parameters(*embed_tokens_);  // sharded construction: one unit's memory at a time
  auto layers = model->register_module("layers", std::make_shared<torch::nn::Module>());
  for (int64_t i = 0; i < s.layers; ++i) {
    layers_.push_back(layers->register_module(std::to_string(i), std::make_shared<Layer>(s, i)));
    release_built_parameters(*layers_.back());
  }
  norm_weight_ = norm_weight(*model, "norm", s.hidden_size);
  if (!s.tie_word_embeddings)
    lm_head_ = register_module("lm_head", std::make_shared<torch::nn::Module>())
                   ->register_parameter("weight", torch::empty({s.vocab_size, s.hidden_size}, parameter_options()));
  InitPass pass = hf_init_pass(s.initializer_range, {"norm"});
  if (s.norm_plus_one)  // (1 + weight) norms start at weight 0, as HF initialises them
    pass.init = [base = pass.init](const std::string& name, torch::Tensor& p) {
      name.find("norm") != std::string::npos ? static_cast<void>(p.zero_()) : base(name, p);
    };
  initialise_parameters({pass});
}

torch::Tensor RotaryDecoder::hidden_states(const Batch& batch, KvCache* cache) {
  const auto& ids = batch.input_ids;
  const auto T = ids.size(1);
  const int64_t past = cache ? cache->length : 0;
  // dynamic scaling exists for sequences past max_position_embeddings; the other types keep the limit
  if (!rope_extends_context(spec_.rope) && sequence_extent(batch, past, T) > spec_.max_positions)
    throw RuntimeFailure(family()->model_type + ": sequence length " + std::to_string(sequence_extent(batch, past, T)) +
                         " exceeds max_position_embeddings " + std::to_string(spec_.max_positions));
  auto x = in_unit(embeddings_unit_, [&] {
    auto e = add_neftune_noise(apply_embedding(embed_tokens_, ids), is_training() ? neftune_noise_alpha_ : 0.0);
    // gemma: times sqrt(hidden_size), the normaliser in the compute dtype as HF rounds it
    return spec_.scale_embeddings ? e * torch::scalar_tensor(std::sqrt(static_cast<double>(spec_.hidden_size)), e.options())
                                  : e;
  });
  // Rotary tables as HF computes them: positions [b, T] (b = 1, or the rows of batched generation) ->
  // cos / sin [b, 1, T, head_dim]
  const torch::Tensor positions = token_positions(batch, past, T, x.device());
  torch::Tensor global_cos, global_sin, local_cos, local_sin;
  const int64_t extent = batch.sliced() ? batch.slice.length : 0;  // a slice scales by its whole rows' length
  std::tie(global_cos, global_sin) = rotary_tables(spec_.rope, positions, x.scalar_type(), extent);
  if (spec_.sliding_rope) std::tie(local_cos, local_sin) = rotary_tables(*spec_.sliding_rope, positions, x.scalar_type(), extent);
  // A sequence-parallel slice attends over its whole rows: their mask, and the group that exchanges the slices.
  const SequenceParallel* sp = batch.sliced() ? sequence_parallel_.get() : nullptr;
  if (batch.sliced() && (!sp || sp->size() != batch.slice.parts || cache))
    throw RuntimeFailure(family()->model_type + ": a batch sliced into " + std::to_string(batch.slice.parts) +
                         " parts needs a sequence-parallel group of that size" + (cache ? " and no KV cache" : ""));
  auto bias = padding_bias(sp ? batch.slice.attention_mask : batch.attention_mask, x.scalar_type(), batch.has_padding);
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    Layer* l = layers_[i].get();
    const bool local = spec_.sliding_rope && spec_.windows[i] > 0;  // gemma3: sliding layers turn by their own base
    const torch::Tensor& cos = local ? local_cos : global_cos;
    const torch::Tensor& sin = local ? local_sin : global_sin;
    if (gradient_checkpointing_ && is_training()) {
      x = checkpointed(checkpoint_fns_->hold(
                           [this, l, cos, sin, bias, i, sp, segments = batch.packed_lengths](const torch::Tensor& in) {
                             return in_unit(layer_units_[i], [&] { return l->forward(in, cos, sin, bias, segments, nullptr, i, sp); });
                           },
                           4 * layers_.size()),
                       x);
    } else {
      x = in_unit(layer_units_[i], [&] { return l->forward(x, cos, sin, bias, batch.packed_lengths, cache, i, sp); });
    }
  }
  if (cache) cache->length += T;
  return x;
}

Model::LmHead RotaryDecoder::head(const torch::Tensor& hidden) {
  return {norm(spec_, hidden, norm_weight_), spec_.tie_word_embeddings ? embed_tokens_->weight : lm_head_, {},
          spec_.final_logit_softcap};
}

ModelOutput RotaryDecoder::forward(const Batch& batch) {
  const torch::Tensor hidden = hidden_states(batch, nullptr);
  return language_model_output(head_unit_, batch, /*shift=*/true, [&] { return head(hidden); });
}

torch::Tensor RotaryDecoder::forward_cached(const torch::Tensor& input_ids, KvCache& cache) {
  Batch batch;
  batch.input_ids = input_ids;
  batch.attention_mask = cache.key_mask;  // batched generation: left padding, per-row positions
  batch.position_ids = cache.positions;
  const torch::Tensor hidden = hidden_states(batch, &cache);
  return head_logits(head_unit_, [&] { return head(hidden); });
}

}  // namespace hftrain
