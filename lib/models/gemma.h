// `gemma`: HF GemmaForCausalLM (Gemma 1): the shared llama-like decoder (models/decoder) with RMSNorms that
// scale by (1 + weight) (weights initialised to zero), embeddings times sqrt(hidden_size), a GELU-tanh gated
// MLP (`hidden_activation`, else `hidden_act`), head_dim explicit (256 by default) and a tied LM head.
#pragma once

#include "models/decoder.h"

namespace hftrain {

class Gemma : public RotaryDecoder {
 public:
  struct Options : DecoderOptions {
    Options() {  // GemmaConfig's defaults
      hidden_size = 3072;
      intermediate_size = 24576;
      num_hidden_layers = 28;
      num_attention_heads = 16;
      num_key_value_heads = 16;
      head_dim = 256;
      hidden_act = "gelu_pytorch_tanh";
      tie_word_embeddings = true;
    }
    std::optional<std::string> hidden_activation;  // null = hidden_act
    bool attention_bias = false;
    static void declare(Schema<Options>& s);
  };

  Gemma(const Options& options, const ModelContext& context);
  static const ModelFamily& declaration();

 private:
  Options options_;
};

}  // namespace hftrain
