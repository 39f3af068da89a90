// `qwen2`: HF Qwen2ForCausalLM (Qwen2, Qwen2.5): the shared llama-like decoder (models/decoder) with
// biases on q/k/v (not o), and Qwen2Config's sliding window (use_sliding_window, sliding_window,
// max_window_layers, or v5's layer_types).
#pragma once

#include "models/decoder.h"

namespace hftrain {

class Qwen2 : public RotaryDecoder {
 public:
  struct Options : DecoderOptions {
    Options() { intermediate_size = 22016; }  // Qwen2Config's default
    bool use_sliding_window = false;
    std::optional<int64_t> sliding_window = 4096;
    int64_t max_window_layers = 28;
    std::optional<std::vector<std::string>> layer_types;  // null = from max_window_layers
    static void declare(Schema<Options>& s);
  };

  Qwen2(const Options& options, const ModelContext& context);
  static const ModelFamily& declaration();

 private:
  Options options_;
};

}  // namespace hftrain
