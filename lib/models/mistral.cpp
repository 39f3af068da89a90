// `mistral` model (see mistral.h): llama's decoder, every layer sliding.
#include "models/mistral.h"

#include "util/error.h"

namespace hftrain {

void Mistral::Options::declare(Schema<Options>& s) {
  declare_decoder_options(s);
  s.add("sliding_window", &Options::sliding_window, "Keys each query sees, itself included; null = full attention.");
}

ModelDimensions Mistral::facts(const Options& o) { return {o.hidden_size, o.num_hidden_layers, o.num_attention_heads}; }

const ModelFamily& Mistral::declaration() {
  static const ModelFamily family = [] {
    ModelFamily f;
    f.type = f.model_type = "mistral";
    f.architectures = {"MistralForCausalLM", "MistralModel"};
    f.lora_target_modules = {"q_proj", "v_proj"};
    f.rotary = true;
    f.strict_config_keys = true;
    f.load = {"model.", {".rotary_emb.inv_freq", "lm_head.weight"}, {}};
    return f;
  }();
  return family;
}

Mistral::Mistral(const Options& options, const ModelContext& context) : options_(options) {
  DecoderSpec spec = resolve_decoder(options_, context);
  if (options_.sliding_window && *options_.sliding_window <= 0)
    throw ConfigError("model.sliding_window: " + std::to_string(*options_.sliding_window) + " (a positive window, or null)");
  spec.windows.assign(spec.windows.size(), options_.sliding_window.value_or(0));
  declare_family(declaration(), options_, [this](nlohmann::json& j) { decoder_config(j, this->spec(), options_); });
  build(spec);
}

}  // namespace hftrain
