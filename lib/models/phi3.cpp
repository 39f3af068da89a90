// `phi3` model (see phi3.h): llama's decoder with fused qkv / gate_up projections, a partial rotary and
// mistral's sliding window.
#include "models/phi3.h"

#include "util/error.h"

namespace hftrain {

void Phi3::Options::declare(Schema<Options>& s) {
  declare_decoder_options(s);
  s.add("partial_rotary_factor", &Options::partial_rotary_factor, "Share of each head's dims that rotary turns.")
      .greater_than(0)
      .max(1);
  s.add("sliding_window", &Options::sliding_window, "Keys each query sees, itself included; null = full attention.");
}

const ModelFamily& Phi3::declaration() {
  static const ModelFamily family = [] {
    ModelFamily f = decoder_family("phi3", "Phi3");
    f.lora_target_modules = {};  // PEFT has no default for phi3: target_modules must be named
    // dropouts hftrain does not build (0 in every published config); LongRoPE's original length (read into
    // rope_scaling by runspec/rope_scaling); the remote-code class map
    f.neutral_config_keys = {{"resid_pdrop", 0.0}, {"embd_pdrop", 0.0}, {"original_max_position_embeddings", nullptr},
                             {"auto_map", nullptr}};
    return f;
  }();
  return family;
}

Phi3::Phi3(const Options& options, const ModelContext& context) : options_(options) {
  DecoderSpec spec = resolve_decoder(options_, context, options_.partial_rotary_factor);
  const auto& o = options_;
  if (o.sliding_window && *o.sliding_window <= 0)
    throw ConfigError("model.sliding_window: " + std::to_string(*o.sliding_window) + " (a positive window, or null)");
  spec.windows.assign(spec.windows.size(), o.sliding_window.value_or(0));
  spec.fused_qkv = spec.fused_gate_up = true;
  build(declaration(), options_, spec);
}

}  // namespace hftrain
