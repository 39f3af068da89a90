// `gpt2` model (see gpt2.h). Numerics follow HF GPT2Attention's eager path: scores scaled by
// 1/sqrt(head_dim), causal mask, additive padding mask, softmax, dropout; GPT-2 init with the
// residual projections (c_proj) drawn with std initializer_range / sqrt(2 * n_layer).
#include "models/gpt2.h"
#include "models/construction.h"
#include "models/fused_embedding.h"
#include "models/fused_norms.h"

#include <cmath>
#include <tuple>

#include "models/checkpointing.h"
#include "models/hf_layers.h"
#include "util/error.h"

namespace hftrain {

void Gpt2::Options::declare(Schema<Options>& s) {
  s.add("vocab_size", &Options::vocab_size, "Vocabulary size; 0 = from the data's tokenizer.").min(0);
  s.add("n_positions", &Options::n_positions, "Maximum sequence length (position embeddings); 0 = from the data.").min(0);
  s.add("n_ctx", &Options::n_ctx, "Legacy GPT-2 config key; used as n_positions when that is 0.").min(0);
  s.add("n_embd", &Options::n_embd, "Hidden size (divisible by n_head).").min(1);
  s.add("n_layer", &Options::n_layer, "Number of transformer blocks.").min(1);
  s.add("n_head", &Options::n_head, "Attention heads per block.").min(1);
  s.add("n_inner", &Options::n_inner, "MLP inner size; null = 4 * n_embd.");
  s.add("activation_function", &Options::activation_function, "MLP activation (HF name, e.g. gelu_new).");
  s.add("resid_pdrop", &Options::resid_pdrop, "Dropout on residual branches.").min(0).max(1);
  s.add("embd_pdrop", &Options::embd_pdrop, "Dropout on the embeddings.").min(0).max(1);
  s.add("attn_pdrop", &Options::attn_pdrop, "Dropout on attention probabilities.").min(0).max(1);
  s.add("layer_norm_epsilon", &Options::layer_norm_epsilon, "LayerNorm epsilon.").greater_than(0);
  s.add("initializer_range", &Options::initializer_range, "Std of the normal initialisation.").greater_than(0);
  s.add("scale_attn_weights", &Options::scale_attn_weights, "Scale attention scores by 1/sqrt(head_dim).");
  s.add("tie_word_embeddings", &Options::tie_word_embeddings, "LM head shares the token embedding matrix.");
}

struct Gpt2::Block : torch::nn::Module {
  Block(const Options& o, int64_t inner) : o(o) {
    ln_1 = register_module("ln_1", new_layer_norm(o.n_embd, o.layer_norm_epsilon));
    auto attn = register_module("attn", std::make_shared<torch::nn::Module>());
    c_attn = attn->register_module("c_attn", std::make_shared<Conv1D>(o.n_embd, 3 * o.n_embd));
    attn_proj = attn->register_module("c_proj", std::make_shared<Conv1D>(o.n_embd, o.n_embd));
    ln_2 = register_module("ln_2", new_layer_norm(o.n_embd, o.layer_norm_epsilon));
    auto mlp = register_module("mlp", std::make_shared<torch::nn::Module>());
    c_fc = mlp->register_module("c_fc", std::make_shared<Conv1D>(o.n_embd, inner));
    mlp_proj = mlp->register_module("c_proj", std::make_shared<Conv1D>(inner, o.n_embd));
  }

  // `segments`: a padding-free row's example lengths (attention inside each); empty = one example per row.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& bias, const std::vector<int64_t>& segments,
                        KvCache* cache = nullptr, std::size_t layer = 0) {
    const auto B = x.size(0), T = x.size(1), C = x.size(2);
    auto qkv = c_attn->forward(apply_layer_norm(ln_1, x)).split(C, 2);
    auto heads = [&](const torch::Tensor& t) { return t.view({B, T, o.n_head, C / o.n_head}).transpose(1, 2); };
    auto q = heads(qkv[0]);
    // HF divides the scores by sqrt(head_dim) only when scale_attn_weights; attend() always scales.
    if (!o.scale_attn_weights) q = q * std::sqrt(static_cast<double>(C / o.n_head));
    auto y = self_attention(q, heads(qkv[1]), heads(qkv[2]), bias, segments, is_training() ? o.attn_pdrop : 0.0, cache, layer);
    y = y.transpose(1, 2).contiguous().view({B, T, C});
    auto [h, normed] = add_layer_norm(ln_2, x, torch::dropout(attn_proj->forward(y), o.resid_pdrop, is_training()));
    auto m = mlp_proj->forward(apply_activation(o.activation_function, c_fc->forward(normed)));
    return h + torch::dropout(m, o.resid_pdrop, is_training());
  }

  Options o;
  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  std::shared_ptr<Conv1D> c_attn, attn_proj, c_fc, mlp_proj;
};

namespace {

// The options with the data's sizes filled in, checked.
Gpt2::Options resolved(Gpt2::Options o, const ModelContext& context) {
  if (o.n_positions == 0) o.n_positions = o.n_ctx;
  resolve_lm_sizes({o.vocab_size, &o.n_positions, "n_positions", o.n_embd, o.n_head, "n_embd", "n_head"}, context);
  check_activation(o.activation_function, "model.activation_function");
  return o;
}

}  // namespace

ModelDimensions Gpt2::facts(const Options& o) { return {o.n_embd, o.n_layer, o.n_head}; }

const ModelFamily& Gpt2::declaration() {
  static const ModelFamily family = [] {
    ModelFamily f;
    f.type = f.model_type = "gpt2";
    f.architectures = {"GPT2LMHeadModel", "GPT2Model"};
    f.lora_target_modules = {"c_attn"};
    f.load.base_prefix = "transformer.";
    f.load.ignored_unexpected = {".attn.bias", ".attn.masked_bias", "lm_head.weight"};
    return f;
  }();
  return family;
}

Gpt2::Gpt2(const Options& options, const ModelContext& context) : options_(resolved(options, context)) {
  auto& o = options_;
  declare_family(declaration(), options_, [this](nlohmann::json& j) { j["n_ctx"] = options_.n_positions; });
  embeddings_unit_ = declare_unit("embeddings", {"transformer.wte.", "transformer.wpe."});
  for (int64_t i = 0; i < o.n_layer; ++i)
    block_units_.push_back(declare_unit("transformer.h." + std::to_string(i), {"transformer.h." + std::to_string(i) + "."}));
  head_unit_ = declare_unit("head", {"transformer.ln_f.", o.tie_word_embeddings ? "transformer.wte.weight" : "lm_head.weight"});
  const int64_t inner = o.n_inner.value_or(4 * o.n_embd);
  checkpoint_fns_ = std::make_shared<CheckpointFunctions>();

  transformer_ = register_module("transformer", std::make_shared<torch::nn::Module>());
  wte_ = transformer_->register_module("wte", new_embedding(o.vocab_size, o.n_embd));
  wpe_ = transformer_->register_module("wpe", new_embedding(o.n_positions, o.n_embd));
  release_built_parameters(*transformer_);  // sharded construction: one unit's memory at a time
  auto h = transformer_->register_module("h", std::make_shared<torch::nn::Module>());
  for (int64_t i = 0; i < o.n_layer; ++i) {
    blocks_.push_back(h->register_module(std::to_string(i), std::make_shared<Block>(o, inner)));
    release_built_parameters(*blocks_.back());
  }
  ln_f_ = transformer_->register_module("ln_f", new_layer_norm(o.n_embd, o.layer_norm_epsilon));
  if (!o.tie_word_embeddings) {
    auto head = register_module("lm_head", std::make_shared<torch::nn::Module>());
    lm_head_ = head->register_parameter("weight", torch::empty({o.vocab_size, o.n_embd}, parameter_options()));
  }

  // HF GPT2PreTrainedModel._init_weights: every parameter, then the residual projections again with
  // std / sqrt(2 n_layer), block by block.
  InitPass residual;
  residual.selects = [](const std::string& name) {
    return name.rfind("transformer.h.", 0) == 0 && (name.find(".attn.c_proj.weight") != std::string::npos ||
                                                    name.find(".mlp.c_proj.weight") != std::string::npos);
  };
  const double residual_std = o.initializer_range / std::sqrt(2.0 * static_cast<double>(o.n_layer));
  residual.init = [residual_std](const std::string&, torch::Tensor& p) { p.normal_(0.0, residual_std); };
  initialise_parameters({hf_init_pass(o.initializer_range, {"ln_"}), residual});
}

torch::Tensor Gpt2::hidden_states(const Batch& batch, KvCache* cache) {
  const auto& idx = batch.input_ids;
  const auto T = idx.size(1);
  const int64_t past = cache ? cache->length : 0;
  if (sequence_extent(batch, past, T) > options_.n_positions)
    throw RuntimeFailure("gpt2: sequence length " + std::to_string(sequence_extent(batch, past, T)) + " exceeds n_positions " +
                         std::to_string(options_.n_positions));
  auto pos = token_positions(batch, past, T, idx.device());
  auto x = in_unit(embeddings_unit_, [&] {
    auto tokens = apply_embedding(wte_, idx);
    if (neftune_noise_alpha_ > 0 && is_training()) {
      const double magnitude = neftune_noise_alpha_ / std::sqrt(static_cast<double>(T * options_.n_embd));
      tokens = tokens + torch::empty_like(tokens).uniform_(-magnitude, magnitude);
    }
    return torch::dropout(tokens + apply_embedding(wpe_, pos), options_.embd_pdrop, is_training());
  });
  auto bias = padding_bias(batch.attention_mask, x.scalar_type(), batch.has_padding);
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    Block* b = blocks_[i].get();
    if (gradient_checkpointing_ && is_training()) {
      x = checkpointed(checkpoint_fns_->hold(
                           [this, b, bias, i, segments = batch.packed_lengths](const torch::Tensor& in) {
                             return in_unit(block_units_[i], [&] { return b->forward(in, bias, segments); });
                           },
                           4 * blocks_.size()),
                       x);
    } else {
      x = in_unit(block_units_[i], [&] { return b->forward(x, bias, batch.packed_lengths, cache, i); });
    }
  }
  if (cache) cache->length += T;
  return x;
}

Model::LmHead Gpt2::head(const torch::Tensor& hidden) {
  return {apply_layer_norm(ln_f_, hidden), options_.tie_word_embeddings ? wte_->weight : lm_head_, {}};
}

torch::Tensor Gpt2::lm_logits(const torch::Tensor& hidden) {
  return head_logits(head_unit_, [&] { return head(hidden); });
}

ModelOutput Gpt2::forward(const Batch& batch) {
  const torch::Tensor hidden = hidden_states(batch, nullptr);
  return language_model_output(head_unit_, batch, /*shift=*/true, [&] { return head(hidden); });
}

torch::Tensor Gpt2::forward_cached(const torch::Tensor& input_ids, KvCache& cache) {
  Batch batch;
  batch.input_ids = input_ids;
  batch.attention_mask = cache.key_mask;  // batched generation: left padding, per-row positions
  batch.position_ids = cache.positions;
  return lm_logits(hidden_states(batch, &cache));
}

}  // namespace hftrain
