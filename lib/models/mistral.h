// `mistral`: HF MistralForCausalLM: the shared llama-like decoder (models/decoder) with every layer's
// attention sliding over `sliding_window` keys (itself included) in training, in the KV cache and in
// generation; null = full attention.
#pragma once

#include "models/decoder.h"

namespace hftrain {

class Mistral : public RotaryDecoder {
 public:
  struct Options : DecoderOptions {
    Options() {  // MistralConfig's defaults
      intermediate_size = 14336;
      num_key_value_heads = 8;
    }
    std::optional<int64_t> sliding_window = 4096;
    static void declare(Schema<Options>& s);
  };

  Mistral(const Options& options, const ModelContext& context);
  static const ModelFamily& declaration();

 private:
  Options options_;
};

}  // namespace hftrain
