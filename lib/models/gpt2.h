// `gpt2`: HF GPT2LMHeadModel (transformer.wte / wpe / h.N.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
// mlp.c_proj} / ln_f, Conv1D weights [in, out], LM head tied to wte). Options carry GPT2Config's names.
#pragma once

#include <functional>

#include "config/schema.h"
#include "models/model.h"

namespace hftrain {

class CheckpointFunctions;

class Gpt2 : public Model {
 public:
  struct Options {
    int64_t vocab_size = 0;   // 0 = from data
    int64_t n_positions = 0;  // 0 = from data
    int64_t n_ctx = 0;        // legacy alias of n_positions (older config.json files)
    int64_t n_embd = 768;
    int64_t n_layer = 12;
    int64_t n_head = 12;
    std::optional<int64_t> n_inner;  // null = 4 * n_embd
    std::string activation_function = "gelu_new";
    double resid_pdrop = 0.1, embd_pdrop = 0.1, attn_pdrop = 0.1;
    double layer_norm_epsilon = 1e-5;
    double initializer_range = 0.02;
    bool scale_attn_weights = true;
    bool tie_word_embeddings = true;
    static void declare(Schema<Options>& s);
  };

  Gpt2(const Options& options, const ModelContext& context);
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
  LmHead head(const torch::Tensor& hidden);  // ln_f and the (tied) lm_head
  torch::Tensor lm_logits(const torch::Tensor& hidden);
  Options options_;
  UnitHandle embeddings_unit_, head_unit_;
  std::vector<UnitHandle> block_units_;
  std::shared_ptr<torch::nn::Module> transformer_;
  torch::nn::Embedding wte_{nullptr}, wpe_{nullptr};
  std::vector<std::shared_ptr<Block>> blocks_;
  torch::nn::LayerNorm ln_f_{nullptr};
  torch::Tensor lm_head_;  // defined only when tie_word_embeddings is false
  bool gradient_checkpointing_ = false;
  double neftune_noise_alpha_ = 0.0;
  std::shared_ptr<CheckpointFunctions> checkpoint_fns_;
};

}  // namespace hftrain
