// `mixtral`: HF MixtralForCausalLM: mistral's decoder (every layer sliding over `sliding_window` keys, null =
// full attention) with each layer's MLP a routed block (models/moe) named block_sparse_moe: router `gate`,
// experts.E.{w1, w3, w2} (gate, up, down), top num_experts_per_tok of num_local_experts renormalised,
// router_jitter_noise in training; the load-balancing loss with output_router_logits (models/moe_decoder).
#pragma once

#include "models/moe_decoder.h"

namespace hftrain {

class Mixtral : public MoeDecoder {
 public:
  struct Options : DecoderOptions {
    Options() {  // MixtralConfig's defaults
      intermediate_size = 14336;
      num_key_value_heads = 8;
      rms_norm_eps = 1e-5;
      rope_theta = 1e6;
    }
    std::optional<int64_t> sliding_window;
    int64_t num_local_experts = 8;
    int64_t num_experts_per_tok = 2;
    bool output_router_logits = false;
    double router_aux_loss_coef = 0.001;
    double router_jitter_noise = 0.0;
    static void declare(Schema<Options>& s);
  };

  Mixtral(const Options& options, const ModelContext& context);
  static const ModelFamily& declaration();

 private:
  Options options_;
};

}  // namespace hftrain
