// `qwen3` model (see qwen3.h): llama's decoder with per-head q / k norms and Qwen's sliding layers.
#include "models/qwen3.h"

namespace hftrain {

void Qwen3::Options::declare(Schema<Options>& s) {
  declare_decoder_options(s);
  s.add("attention_bias", &Options::attention_bias, "Biases on q/k/v/o projections.");
  declare_qwen_window_options(s);
}

const ModelFamily& Qwen3::declaration() {
  static const ModelFamily family = decoder_family("qwen3", "Qwen3");
  return family;
}

Qwen3::Qwen3(const Options& options, const ModelContext& context) : options_(options) {
  DecoderSpec spec = resolve_decoder(options_, context);
  spec.q_bias = spec.k_bias = spec.v_bias = spec.o_bias = options_.attention_bias;
  spec.qk_norm = true;
  const auto& o = options_;
  spec.windows = qwen_layer_windows(o.num_hidden_layers, o.use_sliding_window, o.sliding_window, o.max_window_layers,
                                    o.layer_types);
  build(declaration(), options_, spec);
}

}  // namespace hftrain
