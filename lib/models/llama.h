// `llama`: HF LlamaForCausalLM (model.embed_tokens, model.layers.N.{input_layernorm,
// self_attn.{q,k,v,o}_proj, post_attention_layernorm, mlp.{gate,up,down}_proj}, model.norm, lm_head):
// the shared llama-like decoder (models/decoder) with LlamaConfig's attention_bias and mlp_bias.
#pragma once

#include "models/decoder.h"

namespace hftrain {

class Llama : public RotaryDecoder {
 public:
  struct Options : DecoderOptions {
    bool attention_bias = false;
    bool mlp_bias = false;
    static void declare(Schema<Options>& s);
  };

  Llama(const Options& options, const ModelContext& context);
  static const ModelFamily& declaration();

 private:
  Options options_;
};

}  // namespace hftrain
