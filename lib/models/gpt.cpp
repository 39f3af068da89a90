// `gpt` model implementation (see gpt.h). Initialisation follows GPT-2 / nanoGPT: N(0, 0.02) for
// weights, N(0, 0.02/sqrt(2*n_layer)) for residual projections, zero biases, unit LayerNorm weights.
#include "models/gpt.h"
#include "models/construction.h"

#include <cmath>

#include "models/checkpointing.h"
#include "models/fused_activations.h"
#include "models/fused_embedding.h"
#include "models/fused_norms.h"
#include "models/hf_layers.h"
#include "util/error.h"
#include "util/strings.h"

namespace hftrain {

void Gpt::Options::declare(Schema<Options>& s) {
  s.add("n_layer", &Options::n_layer, "Number of transformer blocks.").min(1);
  s.add("n_head", &Options::n_head, "Attention heads per block.").min(1);
  s.add("n_embd", &Options::n_embd, "Embedding width (divisible by n_head).").min(1);
  s.add("block_size", &Options::block_size, "Maximum sequence length; 0 = from the data.").min(0);
  s.add("vocab_size", &Options::vocab_size, "Vocabulary size; 0 = from the data's tokenizer.").min(0);
  s.add("dropout", &Options::dropout, "Dropout on embeddings, attention and residuals.").min(0).max(1);
  s.add("bias", &Options::bias, "Use biases in Linear and LayerNorm layers.");
}

namespace {

AdaptableLinear make_linear(int64_t in, int64_t out, bool bias) {
  return new_linear(in, out, bias);
}

torch::nn::LayerNorm make_layer_norm(int64_t n) {
  return new_layer_norm(n, 1e-5);
}

}  // namespace

struct Gpt::Block : torch::nn::Module {
  Block(const Options& o) : n_head(o.n_head), dropout(o.dropout) {
    ln_1 = register_module("ln_1", make_layer_norm(o.n_embd));
    attn = register_module("attn", std::make_shared<torch::nn::Module>());
    c_attn = attn->register_module("c_attn", make_linear(o.n_embd, 3 * o.n_embd, o.bias));
    attn_proj = attn->register_module("c_proj", make_linear(o.n_embd, o.n_embd, o.bias));
    ln_2 = register_module("ln_2", make_layer_norm(o.n_embd));
    mlp = register_module("mlp", std::make_shared<torch::nn::Module>());
    c_fc = mlp->register_module("c_fc", make_linear(o.n_embd, 4 * o.n_embd, o.bias));
    mlp_proj = mlp->register_module("c_proj", make_linear(4 * o.n_embd, o.n_embd, o.bias));
    attn_dropout = register_module("attn_dropout", torch::nn::Dropout(o.dropout));
    resid_dropout = register_module("resid_dropout", torch::nn::Dropout(o.dropout));
  }

  // `key_bias`: generation's additive padding bias over the cached and new keys (left-padded rows); may be undefined.
  torch::Tensor attention(const torch::Tensor& x, KvCache* cache, std::size_t layer, const std::vector<int64_t>& segments,
                          const torch::Tensor& key_bias) {
    const auto B = x.size(0), T = x.size(1), C = x.size(2);
    auto qkv = c_attn(x).split(C, 2);
    auto heads = [&](const torch::Tensor& t) { return t.view({B, T, n_head, C / n_head}).transpose(1, 2); };
    auto y = self_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), key_bias, segments,
                            is_training() ? dropout : 0.0, cache, layer);
    y = y.transpose(1, 2).contiguous().view({B, T, C});
    return resid_dropout(attn_proj(y));
  }

  // `segments`: a padding-free row's example lengths; empty = one example per row.
  torch::Tensor forward(const torch::Tensor& x, const std::vector<int64_t>& segments, KvCache* cache = nullptr,
                        std::size_t layer = 0, const torch::Tensor& key_bias = {}) {
    auto [h, normed] = add_layer_norm(ln_2, x, attention(apply_layer_norm(ln_1, x), cache, layer, segments, key_bias));
    return h + resid_dropout(mlp_proj(gelu_activation(c_fc(normed))));
  }

  int64_t n_head;
  double dropout;
  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  std::shared_ptr<torch::nn::Module> attn, mlp;
  AdaptableLinear c_attn{nullptr}, attn_proj{nullptr}, c_fc{nullptr}, mlp_proj{nullptr};
  torch::nn::Dropout attn_dropout{nullptr}, resid_dropout{nullptr};
};

namespace {

// The options with the data's sizes filled in, checked.
Gpt::Options resolved(Gpt::Options o, const ModelContext& context) {
  resolve_lm_sizes({o.vocab_size, &o.block_size, "block_size", o.n_embd, o.n_head, "n_embd", "n_head"}, context);
  return o;
}

}  // namespace

ModelDimensions Gpt::facts(const Options& o) { return {o.n_embd, o.n_layer, o.n_head}; }

// block_size is written under HF's name n_positions, and read back from it.
const ModelFamily& Gpt::declaration() {
  static const ModelFamily family = [] {
    ModelFamily f;
    f.type = f.model_type = "gpt";
    f.architectures = {"GptLMHeadModel"};
    f.lora_target_modules = {"c_attn"};
    f.option_config_keys = {{"block_size", "n_positions"}};
    return f;
  }();
  return family;
}

Gpt::Gpt(const Options& options, const ModelContext& context) : options_(resolved(options, context)) {
  declare_family(declaration(), options_, [](nlohmann::json& j) { j["tie_word_embeddings"] = true; });
  embeddings_unit_ = declare_unit("embeddings", {"transformer.wte.", "transformer.wpe."});
  for (int64_t i = 0; i < options_.n_layer; ++i)
    block_units_.push_back(declare_unit("transformer.h." + std::to_string(i), {"transformer.h." + std::to_string(i) + "."}));
  head_unit_ = declare_unit("head", {"transformer.ln_f.", "transformer.wte.weight"});

  transformer_ = register_module("transformer", std::make_shared<torch::nn::Module>());
  wte_ = transformer_->register_module("wte", new_embedding(options_.vocab_size, options_.n_embd));
  wpe_ = transformer_->register_module("wpe", new_embedding(options_.block_size, options_.n_embd));
  release_built_parameters(*transformer_);  // sharded construction: one unit's memory at a time
  drop_ = transformer_->register_module("drop", torch::nn::Dropout(options_.dropout));
  auto h = transformer_->register_module("h", std::make_shared<torch::nn::Module>());
  for (int64_t i = 0; i < options_.n_layer; ++i) {
    blocks_.push_back(h->register_module(std::to_string(i), std::make_shared<Block>(options_)));
    release_built_parameters(*blocks_.back());
  }
  checkpoint_fns_ = std::make_shared<CheckpointFunctions>();
  ln_f_ = transformer_->register_module("ln_f", make_layer_norm(options_.n_embd));

  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(options_.n_layer));
  InitPass pass;
  pass.selects = [](const std::string&) { return true; };
  pass.init = [residual_std](const std::string& name, torch::Tensor& p) {
    if (name.find("ln_") != std::string::npos) {
      if (ends_with(name, "weight")) p.fill_(1.0); else p.zero_();
    } else if (ends_with(name, "bias")) {
      p.zero_();
    } else if (name.find("c_proj.weight") != std::string::npos) {
      p.normal_(0.0, residual_std);
    } else {
      p.normal_(0.0, 0.02);
    }
  };
  initialise_parameters({pass});
}

torch::Tensor Gpt::hidden_states(const Batch& batch, KvCache* cache) {
  const torch::Tensor& idx = batch.input_ids;
  const auto T = idx.size(1);
  const int64_t past = cache ? cache->length : 0;
  if (sequence_extent(batch, past, T) > options_.block_size)
    throw RuntimeFailure("gpt: sequence length " + std::to_string(sequence_extent(batch, past, T)) + " exceeds block_size " +
                         std::to_string(options_.block_size));
  auto pos = token_positions(batch, past, T, idx.device());
  auto x = in_unit(embeddings_unit_, [&] {
    auto tokens = apply_embedding(wte_, idx);
    if (neftune_noise_alpha_ > 0 && is_training()) {  // NEFTune: U(-1, 1) * alpha / sqrt(T * C)
      const double magnitude = neftune_noise_alpha_ / std::sqrt(static_cast<double>(T * options_.n_embd));
      tokens = tokens + torch::empty_like(tokens).uniform_(-magnitude, magnitude);
    }
    return drop_(tokens + apply_embedding(wpe_, pos));
  });
  const std::vector<int64_t>& segments = batch.packed_lengths;
  // Generation over left-padded rows masks the padding keys (training's right padding needs no mask here:
  // causal attention never reaches it from a token).
  const torch::Tensor key_bias = cache && batch.attention_mask.defined() ? padding_bias(batch.attention_mask, x.scalar_type())
                                                                          : torch::Tensor();
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    Block* block = blocks_[i].get();
    if (gradient_checkpointing_ && is_training()) {
      x = checkpointed(checkpoint_fns_->hold(
                           [this, block, i, segments](const torch::Tensor& in) {
                             return in_unit(block_units_[i], [&] { return block->forward(in, segments); });
                           },
                           4 * blocks_.size()),
                       x);
    } else {
      x = in_unit(block_units_[i], [&] { return block->forward(x, segments, cache, i, key_bias); });
    }
  }
  if (cache) cache->length += T;
  return x;
}

Model::LmHead Gpt::head(const torch::Tensor& hidden) { return {apply_layer_norm(ln_f_, hidden), wte_->weight, {}}; }  // tied head

torch::Tensor Gpt::lm_logits(const torch::Tensor& hidden) {
  return head_logits(head_unit_, [&] { return head(hidden); });
}

ModelOutput Gpt::forward(const Batch& batch) {
  const torch::Tensor hidden = hidden_states(batch, nullptr);
  return language_model_output(head_unit_, batch, /*shift=*/true, [&] { return head(hidden); });
}

torch::Tensor Gpt::forward_cached(const torch::Tensor& input_ids, KvCache& cache) {
  Batch batch;
  batch.input_ids = input_ids;
  batch.attention_mask = cache.key_mask;  // batched generation: left padding, per-row positions
  batch.position_ids = cache.positions;
  return lm_logits(hidden_states(batch, &cache));
}

}  // namespace hftrain
