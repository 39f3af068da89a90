// `qwen2_moe`: HF Qwen2MoeForCausalLM (Qwen1.5-MoE, Qwen2-57B-A14B): qwen2's decoder (q/k/v biases with
// qkv_bias) whose MoE layers (decoder_sparse_step, mlp_only_layers) hold a routed block named mlp (models/moe):
// router `gate`, experts.E.{gate,up,down}_proj of moe_intermediate_size, top num_experts_per_tok of
// num_experts (renormalised with norm_topk_prob), plus a shared expert of shared_expert_intermediate_size
// scaled by sigmoid(shared_expert_gate(x)); the other layers the gated MLP of intermediate_size.
#pragma once

#include "models/moe_decoder.h"

namespace hftrain {

class Qwen2Moe : public MoeDecoder {
 public:
  struct Options : DecoderOptions {
    Options() {  // Qwen2MoeConfig's defaults
      hidden_size = 2048;
      intermediate_size = 5632;
      num_hidden_layers = 24;
      num_attention_heads = 16;
      num_key_value_heads = 16;
    }
    bool qkv_bias = true;
    bool use_sliding_window = false;
    std::optional<int64_t> sliding_window = 4096;
    int64_t max_window_layers = 28;
    std::optional<std::vector<std::string>> layer_types;  // null = from max_window_layers
    int64_t num_experts = 60, num_experts_per_tok = 4, moe_intermediate_size = 1408;
    int64_t shared_expert_intermediate_size = 5632, decoder_sparse_step = 1;
    bool norm_topk_prob = false, output_router_logits = false;
    double router_aux_loss_coef = 0.001;
    std::optional<std::vector<int64_t>> mlp_only_layers;
    static void declare(Schema<Options>& s);
  };

  Qwen2Moe(const Options& options, const ModelContext& context);
  static const ModelFamily& declaration();

 private:
  Options options_;
};

}  // namespace hftrain
