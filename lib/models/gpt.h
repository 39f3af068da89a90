// `gpt`: a decoder-only transformer shaped like GPT-2 / nanoGPT (token + position embeddings,
// pre-LayerNorm blocks, causal self-attention, GELU MLP, weight-tied LM head, dropout).
// Parameter names follow HF GPT-2 (transformer.h.N.attn.c_attn.weight, ...); Linear layout [out, in].
#pragma once

#include <functional>

#include "config/schema.h"
#include "models/model.h"

namespace hftrain {

class CheckpointFunctions;

class Gpt : public Model {
 public:
  struct Options {
    int64_t n_layer = 4;
    int64_t n_head = 4;
    int64_t n_embd = 128;
    int64_t block_size = 0;  // 0 = from data
    int64_t vocab_size = 0;  // 0 = from data
    double dropout = 0.0;
    bool bias = true;
    static void declare(Schema<Options>& s);
  };

  Gpt(const Options& options, const ModelContext& context);
  static ModelDimensions facts(const Options& options);  // HF config.hidden_size, layers, heads
  static const ModelFamily& declaration();
  ModelOutput forward(const Batch& batch) override;
  bool is_causal_lm() const override { return true; }
  void enable_gradient_checkpointing() override { gradient_checkpointing_ = true; }
  void set_neftune_noise_alpha(double alpha) override { neftune_noise_alpha_ = alpha; }
  bool supports_kv_cache() const override { return true; }
  bool supports_padding_free() const override { return true; }
  torch::Tensor forward_cached(const torch::Tensor& input_ids, KvCache& cache) override;

 private:
  struct Block;
  torch::Tensor hidden_states(const Batch& batch, KvCache* cache);  // after the last block
  LmHead head(const torch::Tensor& hidden);                               // ln_f and the tied head
  torch::Tensor lm_logits(const torch::Tensor& hidden);
  Options options_;
  UnitHandle embeddings_unit_, head_unit_;
  std::vector<UnitHandle> block_units_;
  std::shared_ptr<torch::nn::Module> transformer_;
  torch::nn::Embedding wte_{nullptr}, wpe_{nullptr};
  torch::nn::Dropout drop_{nullptr};
  std::vector<std::shared_ptr<Block>> blocks_;
  torch::nn::LayerNorm ln_f_{nullptr};
  std::shared_ptr<CheckpointFunctions> checkpoint_fns_;  // per-forward block functions for checkpointing
  bool gradient_checkpointing_ = false;
  double neftune_noise_alpha_ = 0.0;
};

}  // namespace hftrain
