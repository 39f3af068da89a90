// `llama`: HF LlamaForCausalLM (model.embed_tokens, model.layers.N.{input_layernorm,
// self_attn.{q,k,v,o}_proj, post_attention_layernorm, mlp.{gate,up,down}_proj}, model.norm, lm_head):
// RMSNorm, rotary embeddings (rope_theta and HF's rope_scaling types: models/rotary, rotate_half
// convention), SwiGLU, grouped-query attention.
#pragma once

#include "config/schema.h"
#include "models/model.h"
#include "models/rotary.h"

namespace hftrain {

class CheckpointFunctions;

class Llama : public Model {
 public:
  struct Options {
    int64_t vocab_size = 0;  // 0 = from data
    int64_t hidden_size = 4096;
    int64_t intermediate_size = 11008;
    int64_t num_hidden_layers = 32;
    int64_t num_attention_heads = 32;
    std::optional<int64_t> num_key_value_heads;  // null = num_attention_heads
    std::optional<int64_t> head_dim;             // null = hidden_size / num_attention_heads
    std::string hidden_act = "silu";
    int64_t max_position_embeddings = 0;  // 0 = from data
    double initializer_range = 0.02;
    double rms_norm_eps = 1e-6;
    double rope_theta = 10000.0;
    RopeScaling rope_scaling;  // null = unscaled
    bool tie_word_embeddings = false;
    bool attention_bias = false;
    bool mlp_bias = false;
    double attention_dropout = 0.0;
    static void declare(Schema<Options>& s);
  };

  Llama(const Options& options, const ModelContext& context);
  static ModelDimensions facts(const Options& options);  // HF config.hidden_size, layers, heads
  ModelOutput forward(const Batch& batch) override;
  bool is_causal_lm() const override { return true; }
  nlohmann::json config_json() const override;
  std::vector<GatherUnit> gather_units() const override;
  void enable_gradient_checkpointing() override { gradient_checkpointing_ = true; }
  void set_neftune_noise_alpha(double alpha) override { neftune_noise_alpha_ = alpha; }

  bool supports_kv_cache() const override { return true; }
  bool supports_padding_free() const override { return true; }
  torch::Tensor forward_cached(const torch::Tensor& input_ids, KvCache& cache) override;

 private:
  struct Layer;
  torch::Tensor hidden_states(const Batch& batch, KvCache* cache);  // after the last layer
  LmHead head(const torch::Tensor& hidden);  // the final norm and the (tied) lm_head
  torch::Tensor lm_logits(const torch::Tensor& hidden);
  Options options_;
  int64_t kv_heads_ = 0, head_dim_ = 0;
  RopeSpec rope_;
  torch::nn::Embedding embed_tokens_{nullptr};
  std::vector<std::shared_ptr<Layer>> layers_;
  torch::Tensor norm_weight_, lm_head_;  // lm_head_ undefined when tied
  bool gradient_checkpointing_ = false;
  double neftune_noise_alpha_ = 0.0;
  std::shared_ptr<CheckpointFunctions> checkpoint_fns_;
};

}  // namespace hftrain
