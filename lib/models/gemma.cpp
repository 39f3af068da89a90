// `gemma` model (see gemma.h): llama's decoder with (1 + weight) norms, scaled embeddings and GELU-tanh.
#include "models/gemma.h"

#include "models/hf_layers.h"

namespace hftrain {

void Gemma::Options::declare(Schema<Options>& s) {
  declare_decoder_options(s);
  s.add("hidden_activation", &Options::hidden_activation,
        "Gate activation of the gated MLP (HF name); null = hidden_act (configs before transformers 4.39).");
  s.add("attention_bias", &Options::attention_bias, "Biases on q/k/v/o projections.");
}

const ModelFamily& Gemma::declaration() {
  static const ModelFamily family = decoder_family("gemma", "Gemma");
  return family;
}

Gemma::Gemma(const Options& options, const ModelContext& context) : options_(options) {
  DecoderSpec spec = resolve_decoder(options_, context);
  if (options_.hidden_activation) {
    check_activation(*options_.hidden_activation, "model.hidden_activation");
    spec.hidden_act = *options_.hidden_activation;
  }
  spec.q_bias = spec.k_bias = spec.v_bias = spec.o_bias = options_.attention_bias;
  spec.norm_plus_one = spec.scale_embeddings = true;
  build(declaration(), options_, spec);
}

}  // namespace hftrain
