// `mistral` model (see mistral.h): llama's decoder, every layer sliding.
#include "models/mistral.h"

#include "util/error.h"

namespace hftrain {

void Mistral::Options::declare(Schema<Options>& s) {
  declare_decoder_options(s);
  s.add("sliding_window", &Options::sliding_window, "Keys each query sees, itself included; null = full attention.");
}

const ModelFamily& Mistral::declaration() {
  static const ModelFamily family = decoder_family("mistral", "Mistral");
  return family;
}

Mistral::Mistral(const Options& options, const ModelContext& context) : options_(options) {
  DecoderSpec spec = resolve_decoder(options_, context);
  if (options_.sliding_window && *options_.sliding_window <= 0)
    throw ConfigError("model.sliding_window: " + std::to_string(*options_.sliding_window) + " (a positive window, or null)");
  spec.windows.assign(spec.windows.size(), options_.sliding_window.value_or(0));
  build(declaration(), options_, spec);
}

}  // namespace hftrain
