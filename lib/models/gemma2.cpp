// `gemma2` model (see gemma2.h): gemma's decoder with sandwich norms, soft-caps, query_pre_attn_scalar and
// alternating sliding layers (transformers' modeling_gemma2.py / configuration_gemma2.py).
#include "models/gemma2.h"

#include <cmath>

#include "models/hf_layers.h"
#include "util/error.h"

namespace hftrain {
namespace {

// A soft-cap option: null or 0 = none, else a positive cap.
double softcap(const std::optional<double>& cap, const std::string& key) {
  if (cap && *cap < 0) throw ConfigError("model." + key + ": " + std::to_string(*cap) + " (a positive cap, or null)");
  return cap.value_or(0.0);
}

// Per layer: `window` for a sliding layer (layer_types[i] == "sliding_attention", else (i + 1) % pattern != 0),
// 0 for a global one.
std::vector<int64_t> gemma_layer_windows(int64_t layers, int64_t pattern, const std::optional<int64_t>& window,
                                         const std::optional<std::vector<std::string>>& layer_types) {
  if (layer_types && static_cast<int64_t>(layer_types->size()) != layers)
    throw ConfigError("model.layer_types: " + std::to_string(layer_types->size()) + " entries for " + std::to_string(layers) +
                      " layers");
  std::vector<int64_t> windows(static_cast<std::size_t>(layers), 0);
  for (int64_t i = 0; i < layers; ++i) {
    const std::string type = layer_types ? (*layer_types)[static_cast<std::size_t>(i)]
                                         : ((i + 1) % pattern != 0 ? "sliding_attention" : "full_attention");
    if (type != "sliding_attention" && type != "full_attention")
      throw ConfigError("model.layer_types: '" + type + "' is not built (full_attention, sliding_attention)");
    if (type == "full_attention") continue;
    if (!window || *window <= 0)
      throw ConfigError("model.sliding_window: layer " + std::to_string(i) + " slides but no positive window is given");
    windows[static_cast<std::size_t>(i)] = *window;
  }
  return windows;
}

}  // namespace

void Gemma2::Options::declare(Schema<Options>& s) { declare_gemma2_options(s); }

ModelFamily Gemma2::gemma_family(const std::string& type, const std::string& stem) {
  ModelFamily f = decoder_family(type, stem);
  // generate()'s cache class (hftrain keeps its own KV cache); the older spelling of sliding_window that some
  // hub files carry, which transformers reads nowhere; bidirectional attention is not built
  f.neutral_config_keys = {{"cache_implementation", nullptr}, {"sliding_window_size", nullptr},
                           {"use_bidirectional_attention", false}};
  return f;
}

const ModelFamily& Gemma2::declaration() {
  static const ModelFamily family = gemma_family("gemma2", "Gemma2");
  return family;
}

DecoderSpec Gemma2::resolve_gemma(Options& o, const ModelContext& context, int64_t pattern) {
  DecoderSpec spec = resolve_decoder(o, context);
  if (o.hidden_activation) {
    check_activation(*o.hidden_activation, "model.hidden_activation");
    spec.hidden_act = *o.hidden_activation;
  } else if (o.hidden_act != "gelu_pytorch_tanh") {  // HF's Gemma2 / Gemma3 MLPs read hidden_activation only
    throw ConfigError("model.hidden_act: '" + o.hidden_act + "' is not read by transformers' Gemma2 / Gemma3, which use " +
                      "hidden_activation (default gelu_pytorch_tanh): set hidden_activation instead");
  }
  if (o.sliding_window && *o.sliding_window <= 0)
    throw ConfigError("model.sliding_window: " + std::to_string(*o.sliding_window) + " (a positive window, or null)");
  spec.q_bias = spec.k_bias = spec.v_bias = spec.o_bias = o.attention_bias;
  spec.norm_plus_one = spec.scale_embeddings = spec.sandwich_norms = true;
  spec.attention_scale = 1.0 / std::sqrt(o.query_pre_attn_scalar);
  spec.attn_logit_softcap = softcap(o.attn_logit_softcapping, "attn_logit_softcapping");
  spec.final_logit_softcap = softcap(o.final_logit_softcapping, "final_logit_softcapping");
  spec.windows = gemma_layer_windows(o.num_hidden_layers, pattern, o.sliding_window, o.layer_types);
  return spec;
}

Gemma2::Gemma2(const Options& options, const ModelContext& context) : options_(options) {
  const DecoderSpec spec = resolve_gemma(options_, context, /*pattern=*/2);
  declare_family(declaration(), options_, [this](nlohmann::json& j) {
    decoder_config(j, this->spec(), options_);
    j["hidden_activation"] = this->spec().hidden_act;  // HF's Gemma2MLP reads no other key
  });
  build(spec);
}

}  // namespace hftrain
