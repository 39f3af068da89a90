// `gemma3_text`: HF Gemma3ForCausalLM (Gemma3TextConfig): gemma2's decoder (models/gemma2) with per-head q_norm /
// k_norm ((1 + weight) RMSNorms over head_dim, before rotary), five sliding layers to one global one by default
// (layer i slides when (i + 1) % sliding_window_pattern != 0, or as layer_types says), the sliding layers' rotary
// unscaled at rope_local_base_freq while the global ones use rope_theta and rope_scaling, and no soft-caps by
// default. config.json in v5 form (rope_parameters keyed by layer type) is read too and written beside the 4.x keys.
#pragma once

#include "models/gemma2.h"

namespace hftrain {

class Gemma3 : public RotaryDecoder {
 public:
  struct Options : Gemma2::Options {
    Options() {  // Gemma3TextConfig's defaults
      rope_theta = 1000000.0;
      final_logit_softcapping.reset();
      attn_logit_softcapping.reset();
    }
    double rope_local_base_freq = 10000.0;
    int64_t sliding_window_pattern = 6;
    static void declare(Schema<Options>& s);
  };

  Gemma3(const Options& options, const ModelContext& context);
  static const ModelFamily& declaration();

 private:
  Options options_;
};

}  // namespace hftrain
