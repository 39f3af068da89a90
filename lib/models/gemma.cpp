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

ModelDimensions Gemma::facts(const Options& o) { return {o.hidden_size, o.num_hidden_layers, o.num_attention_heads}; }

const ModelFamily& Gemma::declaration() {
  static const ModelFamily family = [] {
    ModelFamily f;
    f.type = f.model_type = "gemma";
    f.architectures = {"GemmaForCausalLM", "GemmaModel"};
    f.lora_target_modules = {"q_proj", "v_proj"};
    f.rotary = true;
    f.strict_config_keys = true;
    f.load = {"model.", {".rotary_emb.inv_freq", "lm_head.weight"}, {}};
    return f;
  }();
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
  declare_family(declaration(), options_, [this](nlohmann::json& j) { decoder_config(j, this->spec(), options_); });
  build(spec);
}

}  // namespace hftrain
