// `phi3`: HF Phi3ForCausalLM (Phi-3, Phi-3.5 mini): the shared llama-like decoder (models/decoder) with q/k/v
// fused into one qkv_proj (q rows, then k, then v), gate and up fused into one gate_up_proj (gate first), a
// partial rotary (partial_rotary_factor of each head), LongRoPE's top-level original_max_position_embeddings,
// and every layer sliding over `sliding_window` keys as mistral's (null = full attention).
#pragma once

#include "models/decoder.h"

namespace hftrain {

class Phi3 : public RotaryDecoder {
 public:
  struct Options : DecoderOptions {
    Options() {  // Phi3Config's defaults
      hidden_size = 3072;
      intermediate_size = 8192;
      rms_norm_eps = 1e-5;
    }
    double partial_rotary_factor = 1.0;
    std::optional<int64_t> sliding_window;  // null = full attention
    static void declare(Schema<Options>& s);
  };

  Phi3(const Options& options, const ModelContext& context);
  static const ModelFamily& declaration();

 private:
  Options options_;
};

}  // namespace hftrain
