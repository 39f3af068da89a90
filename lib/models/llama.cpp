// `llama` model (see llama.h). Follows HF's eager LlamaAttention: q/k rotated with cos/sin of
// position * inv_freq (models/rotary: rope_theta and the rope_scaling type, halves duplicated, rotate_half), k/v heads
// repeated num_attention_heads / num_key_value_heads times, causal + padding mask, softmax in float32.
#include "models/llama.h"
#include "models/construction.h"
#include "models/fused_activations.h"

#include <cmath>
#include <tuple>

#include "models/checkpointing.h"
#include "models/fused_embedding.h"
#include "models/fused_norms.h"
#include "models/hf_layers.h"
#include "util/error.h"

namespace hftrain {

void Llama::Options::declare(Schema<Options>& s) {
  s.add("vocab_size", &Options::vocab_size, "Vocabulary size; 0 = from the data's tokenizer.").min(0);
  s.add("hidden_size", &Options::hidden_size, "Hidden size.").min(1);
  s.add("intermediate_size", &Options::intermediate_size, "SwiGLU inner size.").min(1);
  s.add("num_hidden_layers", &Options::num_hidden_layers, "Number of decoder layers.").min(1);
  s.add("num_attention_heads", &Options::num_attention_heads, "Query heads per layer.").min(1);
  s.add("num_key_value_heads", &Options::num_key_value_heads,
        "Key/value heads (grouped-query attention; divides num_attention_heads); null = num_attention_heads.");
  s.add("head_dim", &Options::head_dim, "Per-head size; null = hidden_size / num_attention_heads.");
  s.add("hidden_act", &Options::hidden_act, "Gate activation of the SwiGLU MLP (HF name, e.g. silu).");
  s.add("max_position_embeddings", &Options::max_position_embeddings, "Maximum sequence length; 0 = from the data.").min(0);
  s.add("initializer_range", &Options::initializer_range, "Std of the normal initialisation.").greater_than(0);
  s.add("rms_norm_eps", &Options::rms_norm_eps, "RMSNorm epsilon.").greater_than(0);
  s.add("rope_theta", &Options::rope_theta, "Rotary embedding base.").greater_than(0);
  s.add("rope_scaling", &Options::rope_scaling,
        "HF rotary scaling: {rope_type: linear | dynamic | llama3 | yarn | longrope, factor: ..., ...} as config.json "
        "writes it; null = none.")
      .check([](const RopeScaling& r) {
        RopeParameters p;
        std::string problem = read_rope_parameters(r.value, p);  // "rope_scaling.factor: ..." -> "factor: ..."
        if (problem.rfind("rope_scaling.", 0) == 0) return problem.substr(13);
        return problem.rfind("rope_scaling: ", 0) == 0 ? problem.substr(14) : problem;
      });
  s.add("tie_word_embeddings", &Options::tie_word_embeddings, "LM head shares the token embedding matrix.");
  s.add("attention_bias", &Options::attention_bias, "Biases on q/k/v/o projections.");
  s.add("mlp_bias", &Options::mlp_bias, "Biases on gate/up/down projections.");
  s.add("attention_dropout", &Options::attention_dropout, "Dropout on attention probabilities.").min(0).max(1);
}

namespace {

torch::Tensor rotate_half(const torch::Tensor& x) {
  const auto half = x.size(-1) / 2;
  return torch::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

AdaptableLinear linear(int64_t in, int64_t out, bool bias) {
  return new_linear(in, out, bias);
}

}  // namespace

struct Llama::Layer : torch::nn::Module {
  Layer(const Options& o, int64_t kv_heads, int64_t head_dim) : o(o), kv_heads(kv_heads), head_dim(head_dim) {
    input_norm = register_module("input_layernorm", std::make_shared<torch::nn::Module>())
                     ->register_parameter("weight", torch::ones({o.hidden_size}, parameter_options()));
    auto attn = register_module("self_attn", std::make_shared<torch::nn::Module>());
    q_proj = attn->register_module("q_proj", linear(o.hidden_size, o.num_attention_heads * head_dim, o.attention_bias));
    k_proj = attn->register_module("k_proj", linear(o.hidden_size, kv_heads * head_dim, o.attention_bias));
    v_proj = attn->register_module("v_proj", linear(o.hidden_size, kv_heads * head_dim, o.attention_bias));
    o_proj = attn->register_module("o_proj", linear(o.num_attention_heads * head_dim, o.hidden_size, o.attention_bias));
    post_norm = register_module("post_attention_layernorm", std::make_shared<torch::nn::Module>())
                    ->register_parameter("weight", torch::ones({o.hidden_size}, parameter_options()));
    auto mlp = register_module("mlp", std::make_shared<torch::nn::Module>());
    gate_proj = mlp->register_module("gate_proj", linear(o.hidden_size, o.intermediate_size, o.mlp_bias));
    up_proj = mlp->register_module("up_proj", linear(o.hidden_size, o.intermediate_size, o.mlp_bias));
    down_proj = mlp->register_module("down_proj", linear(o.intermediate_size, o.hidden_size, o.mlp_bias));
  }

  // `segments`: a padding-free row's example lengths (attention inside each); empty = one example per row.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        const torch::Tensor& bias, const std::vector<int64_t>& segments, KvCache* cache = nullptr,
                        std::size_t layer = 0) {
    const auto B = x.size(0), T = x.size(1);
    auto h = rms_norm(x, input_norm, o.rms_norm_eps);
    auto heads = [&](const torch::Tensor& t, int64_t n) { return t.view({B, T, n, head_dim}).transpose(1, 2); };
    auto q = heads(q_proj(h), o.num_attention_heads);
    auto k = heads(k_proj(h), kv_heads);
    auto v = heads(v_proj(h), kv_heads);
    q = q * cos + rotate_half(q) * sin;
    k = k * cos + rotate_half(k) * sin;
    if (cache) std::tie(k, v) = cache->append(layer, k, v);  // cached with kv_heads heads, rotated
    const int64_t groups = o.num_attention_heads / kv_heads;
    if (groups > 1) {
      k = k.repeat_interleave(groups, 1);
      v = v.repeat_interleave(groups, 1);
    }
    const double dropout = is_training() ? o.attention_dropout : 0.0;
    auto y = segments.empty() ? attend(q, k, v, bias, /*causal=*/true, dropout) : attend_packed(q, k, v, segments, dropout);
    y = y.transpose(1, 2).contiguous().view({B, T, o.num_attention_heads * head_dim});
    auto [r, m] = add_rms_norm(x, o_proj(y), post_norm, o.rms_norm_eps);
    const bool silu = o.hidden_act == "silu" || o.hidden_act == "swish";
    return r + down_proj(silu ? silu_gated(gate_proj(m), up_proj(m)) : apply_activation(o.hidden_act, gate_proj(m)) * up_proj(m));
  }

  Options o;
  int64_t kv_heads, head_dim;
  torch::Tensor input_norm, post_norm;
  AdaptableLinear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr}, gate_proj{nullptr},
      up_proj{nullptr}, down_proj{nullptr};
};

namespace {

// The options with the data's sizes filled in (and num_key_value_heads / head_dim resolved), checked.
Llama::Options resolved(Llama::Options o, const ModelContext& context) {
  if (o.vocab_size == 0) o.vocab_size = context.vocab_size;
  if (o.max_position_embeddings == 0) o.max_position_embeddings = context.max_length;
  if (o.vocab_size <= 0) throw ConfigError("model.vocab_size: the data gives no vocabulary size; set it");
  if (o.max_position_embeddings <= 0)
    throw ConfigError("model.max_position_embeddings: the data gives no sequence length; set it");
  const int64_t kv_heads = o.num_key_value_heads.value_or(o.num_attention_heads);
  if (kv_heads <= 0 || o.num_attention_heads % kv_heads != 0)
    throw ConfigError("model.num_key_value_heads (" + std::to_string(kv_heads) + ") must divide num_attention_heads (" +
                      std::to_string(o.num_attention_heads) + ")");
  if (!o.head_dim && o.hidden_size % o.num_attention_heads != 0)
    throw ConfigError("model: hidden_size (" + std::to_string(o.hidden_size) + ") must be divisible by num_attention_heads (" +
                      std::to_string(o.num_attention_heads) + ")");
  const int64_t head_dim = o.head_dim.value_or(o.hidden_size / o.num_attention_heads);
  if (head_dim <= 0 || head_dim % 2 != 0)
    throw ConfigError("model.head_dim (" + std::to_string(head_dim) + ") must be a positive even number (rotary halves)");
  check_activation(o.hidden_act, "model.hidden_act");
  make_rope_spec(o.rope_theta, o.rope_scaling, head_dim, o.max_position_embeddings, "model.");  // checks it fits
  return o;
}

}  // namespace

ModelDimensions Llama::facts(const Options& o) { return {o.hidden_size, o.num_hidden_layers, o.num_attention_heads}; }

Llama::Llama(const Options& options, const ModelContext& context) : options_(resolved(options, context)) {
  auto& o = options_;
  kv_heads_ = o.num_key_value_heads.value_or(o.num_attention_heads);
  head_dim_ = o.head_dim.value_or(o.hidden_size / o.num_attention_heads);
  rope_ = make_rope_spec(o.rope_theta, o.rope_scaling, head_dim_, o.max_position_embeddings, "model.");
  checkpoint_fns_ = std::make_shared<CheckpointFunctions>();

  auto model = register_module("model", std::make_shared<torch::nn::Module>());
  embed_tokens_ = model->register_module("embed_tokens", new_embedding(o.vocab_size, o.hidden_size));
  release_built_parameters(*embed_tokens_);  // sharded construction: one unit's memory at a time
  auto layers = model->register_module("layers", std::make_shared<torch::nn::Module>());
  for (int64_t i = 0; i < o.num_hidden_layers; ++i) {
    layers_.push_back(layers->register_module(std::to_string(i), std::make_shared<Layer>(o, kv_heads_, head_dim_)));
    release_built_parameters(*layers_.back());
  }
  norm_weight_ = model->register_module("norm", std::make_shared<torch::nn::Module>())
                     ->register_parameter("weight", torch::ones({o.hidden_size}, parameter_options()));
  if (!o.tie_word_embeddings)
    lm_head_ = register_module("lm_head", std::make_shared<torch::nn::Module>())
                   ->register_parameter("weight", torch::empty({o.vocab_size, o.hidden_size}, parameter_options()));
  initialise_parameters({hf_init_pass(o.initializer_range, {"norm"})});
}

torch::Tensor Llama::hidden_states(const Batch& batch, KvCache* cache) {
  const auto& ids = batch.input_ids;
  const auto T = ids.size(1);
  const int64_t past = cache ? cache->length : 0;
  // dynamic scaling exists for sequences past max_position_embeddings; the other types keep the limit
  if (!rope_extends_context(rope_) && sequence_extent(batch, past, T) > options_.max_position_embeddings)
    throw RuntimeFailure("llama: sequence length " + std::to_string(sequence_extent(batch, past, T)) + " exceeds max_position_embeddings " +
                         std::to_string(options_.max_position_embeddings));
  auto x = in_unit(0, [&] {
    auto e = apply_embedding(embed_tokens_, ids);
    if (neftune_noise_alpha_ > 0 && is_training()) {
      const double magnitude = neftune_noise_alpha_ / std::sqrt(static_cast<double>(T * options_.hidden_size));
      e = e + torch::empty_like(e).uniform_(-magnitude, magnitude);
    }
    return e;
  });
  // Rotary tables as HF computes them: positions [b, T] (b = 1, or the rows of batched generation) ->
  // cos / sin [b, 1, T, head_dim]
  torch::Tensor cos, sin;
  std::tie(cos, sin) = rotary_tables(rope_, token_positions(batch, past, T, x.device()), x.scalar_type());
  auto bias = padding_bias(batch.attention_mask, x.scalar_type());
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    Layer* l = layers_[i].get();
    if (gradient_checkpointing_ && is_training()) {
      x = checkpointed(checkpoint_fns_->hold(
                           [this, l, cos, sin, bias, i, segments = batch.packed_lengths](const torch::Tensor& in) {
                             return in_unit(i + 1, [&] { return l->forward(in, cos, sin, bias, segments); });
                           },
                           4 * layers_.size()),
                       x);
    } else {
      x = in_unit(i + 1, [&] { return l->forward(x, cos, sin, bias, batch.packed_lengths, cache, i); });
    }
  }
  if (cache) cache->length += T;
  return x;
}

Model::LmHead Llama::head(const torch::Tensor& hidden) {
  return {rms_norm(hidden, norm_weight_, options_.rms_norm_eps),
          options_.tie_word_embeddings ? embed_tokens_->weight : lm_head_, {}};
}

torch::Tensor Llama::lm_logits(const torch::Tensor& hidden) {
  return head_logits(layers_.size() + 1, [&] { return head(hidden); });
}

std::vector<GatherUnit> Llama::gather_units() const {
  std::vector<GatherUnit> units = {{"embeddings", {"model.embed_tokens."}}};
  for (std::size_t i = 0; i < layers_.size(); ++i)
    units.push_back({"model.layers." + std::to_string(i), {"model.layers." + std::to_string(i) + "."}});
  units.push_back({"head", {"model.norm.", options_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"}});
  return units;
}

ModelOutput Llama::forward(const Batch& batch) {
  const torch::Tensor hidden = hidden_states(batch, nullptr);
  return language_model_output(layers_.size() + 1, batch, /*shift=*/true, [&] { return head(hidden); });
}

torch::Tensor Llama::forward_cached(const torch::Tensor& input_ids, KvCache& cache) {
  Batch batch;
  batch.input_ids = input_ids;
  batch.attention_mask = cache.key_mask;  // batched generation: left padding, per-row positions
  batch.position_ids = cache.positions;
  return lm_logits(hidden_states(batch, &cache));
}

nlohmann::json Llama::config_json() const {
  const auto& o = options_;
  return {{"model_type", "llama"},
          {"architectures", {"LlamaForCausalLM"}},
          {"vocab_size", o.vocab_size},
          {"hidden_size", o.hidden_size},
          {"intermediate_size", o.intermediate_size},
          {"num_hidden_layers", o.num_hidden_layers},
          {"num_attention_heads", o.num_attention_heads},
          {"num_key_value_heads", kv_heads_},
          {"head_dim", head_dim_},
          {"hidden_act", o.hidden_act},
          {"max_position_embeddings", o.max_position_embeddings},
          {"initializer_range", o.initializer_range},
          {"rms_norm_eps", o.rms_norm_eps},
          {"rope_theta", o.rope_theta},
          {"rope_scaling", rope_scaling_json(o.rope_scaling)},
          {"rope_parameters", rope_parameters_json(o.rope_theta, o.rope_scaling)},
          {"tie_word_embeddings", o.tie_word_embeddings},
          {"attention_bias", o.attention_bias},
          {"mlp_bias", o.mlp_bias},
          {"attention_dropout", o.attention_dropout},
          {"torch_dtype", "float32"}};
}

}  // namespace hftrain
