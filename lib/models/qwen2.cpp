// `qwen2` model (see qwen2.h): llama's decoder with q/k/v biases and Qwen2's sliding layers.
#include "models/qwen2.h"

namespace hftrain {

void Qwen2::Options::declare(Schema<Options>& s) {
  declare_decoder_options(s);
  declare_qwen_window_options(s);
}

const ModelFamily& Qwen2::declaration() {
  static const ModelFamily family = decoder_family("qwen2", "Qwen2");
  return family;
}

Qwen2::Qwen2(const Options& options, const ModelContext& context) : options_(options) {
  DecoderSpec spec = resolve_decoder(options_, context);
  spec.q_bias = spec.k_bias = spec.v_bias = true;
  const auto& o = options_;
  spec.windows = qwen_layer_windows(o.num_hidden_layers, o.use_sliding_window, o.sliding_window, o.max_window_layers,
                                    o.layer_types);
  build(declaration(), options_, spec);
}

}  // namespace hftrain
