// `gemma3_text` model (see gemma3.h): gemma2's decoder with per-head q / k norms and a local rotary on the sliding
// layers (transformers' modeling_gemma3.py / configuration_gemma3.py).
#include "models/gemma3.h"

#include "util/error.h"

namespace hftrain {

void Gemma3::Options::declare(Schema<Options>& s) {
  declare_gemma2_options(s);
  s.add("rope_local_base_freq", &Options::rope_local_base_freq, "Rotary base of the sliding layers (unscaled).")
      .greater_than(0);
  s.add("sliding_window_pattern", &Options::sliding_window_pattern,
        "Every this many layers one is global, the others slide (when layer_types is not given).")
      .min(1);
}

const ModelFamily& Gemma3::declaration() {
  static const ModelFamily family = [] {
    ModelFamily f = Gemma2::gemma_family("gemma3_text", "Gemma3");
    f.architectures = {"Gemma3ForCausalLM", "Gemma3TextModel"};  // Gemma3Model is the multimodal one
    f.sliding_rope_theta_key = "rope_local_base_freq";
    return f;
  }();
  return family;
}

Gemma3::Gemma3(const Options& options, const ModelContext& context) : options_(options) {
  DecoderSpec spec = Gemma2::resolve_gemma(options_, context, options_.sliding_window_pattern);
  spec.qk_norm = true;
  spec.sliding_rope = make_rope_spec(options_.rope_local_base_freq, RopeScaling{}, spec.rope.dim,
                                     options_.max_position_embeddings, "model.");
  declare_family(declaration(), options_, [this](nlohmann::json& j) {
    decoder_config(j, this->spec(), options_);
    j["hidden_activation"] = this->spec().hidden_act;  // HF's Gemma3MLP reads no other key
    // v5: the global layers' rotary, and the sliding layers' unscaled one at rope_local_base_freq
    const nlohmann::json global = j["rope_parameters"];
    j["rope_parameters"] = {{"full_attention", global},
                            {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", options_.rope_local_base_freq}}}};
  });
  build(spec);
}

}  // namespace hftrain
