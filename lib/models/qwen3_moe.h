// `qwen3_moe`: HF Qwen3MoeForCausalLM (Qwen3-30B-A3B, Qwen3-235B-A22B): qwen3's decoder (per-head q / k
// RMSNorms, attention_bias) whose MoE layers (decoder_sparse_step, mlp_only_layers) hold a routed block named
// mlp (models/moe): router `gate`, experts.E.{gate,up,down}_proj of moe_intermediate_size, top
// num_experts_per_tok of num_experts (renormalised with norm_topk_prob), no shared expert; the other layers the
// gated MLP of intermediate_size.
#pragma once

#include "models/moe_decoder.h"

namespace hftrain {

class Qwen3Moe : public MoeDecoder {
 public:
  struct Options : DecoderOptions {
    Options() {  // Qwen3MoeConfig's defaults
      hidden_size = 2048;
      intermediate_size = 6144;
      num_hidden_layers = 24;
      num_attention_heads = 32;
      num_key_value_heads = 4;
    }
    bool attention_bias = false;
    bool use_sliding_window = false;
    std::optional<int64_t> sliding_window = 4096;
    int64_t max_window_layers = 28;
    std::optional<std::vector<std::string>> layer_types;  // null = from max_window_layers
    int64_t num_experts = 128, num_experts_per_tok = 8, moe_intermediate_size = 768, decoder_sparse_step = 1;
    bool norm_topk_prob = false, output_router_logits = false;
    double router_aux_loss_coef = 0.001;
    std::optional<std::vector<int64_t>> mlp_only_layers;
    static void declare(Schema<Options>& s);
  };

  Qwen3Moe(const Options& options, const ModelContext& context);
  static const ModelFamily& declaration();

 private:
  Options options_;
};

}  // namespace hftrain
