// `qwen3`: HF Qwen3ForCausalLM: the shared llama-like decoder (models/decoder) with an RMSNorm over head_dim
// of each q and k head before rotary (q_norm, k_norm), head_dim explicit (128 by default, not
// hidden_size / heads), attention_bias on q/k/v/o, and Qwen3Config's sliding layers as Qwen2's.
#pragma once

#include "models/decoder.h"

namespace hftrain {

class Qwen3 : public RotaryDecoder {
 public:
  struct Options : DecoderOptions {
    Options() {  // Qwen3Config's defaults
      intermediate_size = 22016;
      head_dim = 128;
    }
    bool attention_bias = false;
    bool use_sliding_window = false;
    std::optional<int64_t> sliding_window = 4096;
    int64_t max_window_layers = 28;
    std::optional<std::vector<std::string>> layer_types;  // null = from max_window_layers
    static void declare(Schema<Options>& s);
  };

  Qwen3(const Options& options, const ModelContext& context);
  static const ModelFamily& declaration();

 private:
  Options options_;
};

}  // namespace hftrain
