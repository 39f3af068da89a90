// `llama` model (see llama.h): the shared decoder with biases on every projection of attention_bias and
// on the MLP's with mlp_bias.
#include "models/llama.h"

namespace hftrain {

void Llama::Options::declare(Schema<Options>& s) {
  declare_decoder_options(s);
  s.add("attention_bias", &Options::attention_bias, "Biases on q/k/v/o projections.");
  s.add("mlp_bias", &Options::mlp_bias, "Biases on gate/up/down projections.");
}

ModelDimensions Llama::facts(const Options& o) { return {o.hidden_size, o.num_hidden_layers, o.num_attention_heads}; }

const ModelFamily& Llama::declaration() {
  static const ModelFamily family = [] {
    ModelFamily f;
    f.type = f.model_type = "llama";
    f.architectures = {"LlamaForCausalLM", "LlamaModel"};
    f.lora_target_modules = {"q_proj", "v_proj"};
    f.rotary = true;  // rope_scaling / rope_parameters read and checked by runspec/rope_scaling
    f.load = {"model.", {".rotary_emb.inv_freq", "lm_head.weight"}, {}};
    return f;
  }();
  return family;
}

Llama::Llama(const Options& options, const ModelContext& context) : options_(options) {
  DecoderSpec spec = resolve_decoder(options_, context);
  spec.q_bias = spec.k_bias = spec.v_bias = spec.o_bias = options_.attention_bias;
  spec.mlp_bias = options_.mlp_bias;
  declare_family(declaration(), options_, [this](nlohmann::json& j) { decoder_config(j, this->spec(), options_); });
  build(spec);
}

}  // namespace hftrain
