// `llama` model (see llama.h): the shared decoder with biases on every projection of attention_bias and
// on the MLP's with mlp_bias.
#include "models/llama.h"

namespace hftrain {

void Llama::Options::declare(Schema<Options>& s) {
  declare_decoder_options(s);
  s.add("attention_bias", &Options::attention_bias, "Biases on q/k/v/o projections.");
  s.add("mlp_bias", &Options::mlp_bias, "Biases on gate/up/down projections.");
}

const ModelFamily& Llama::declaration() {
  static const ModelFamily family = [] {
    ModelFamily f = decoder_family("llama", "Llama");
    f.strict_config_keys = false;  // llama keeps unknown config keys (saved back verbatim)
    return f;
  }();
  return family;
}

Llama::Llama(const Options& options, const ModelContext& context) : options_(options) {
  DecoderSpec spec = resolve_decoder(options_, context);
  spec.q_bias = spec.k_bias = spec.v_bias = spec.o_bias = options_.attention_bias;
  spec.mlp_bias = options_.mlp_bias;
  build(declaration(), options_, spec);
}

}  // namespace hftrain
