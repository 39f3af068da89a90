// `gemma2`: HF Gemma2ForCausalLM: gemma's decoder (models/decoder: (1 + weight) norms in float32, embeddings times
// sqrt(hidden_size), a GELU-tanh gated MLP, tied head) with the attention output normed before its residual add
// and the MLP between pre_feedforward_layernorm and post_feedforward_layernorm, scores scaled by
// query_pre_attn_scalar^-0.5 and soft-capped (attn_logit_softcapping) before the mask, the logits soft-capped
// (final_logit_softcapping), and sliding layers alternating with global ones (layer i slides when (i + 1) % 2,
// or as layer_types says). Gemma3 (models/gemma3) shares these options.
#pragma once

#include "models/decoder.h"

namespace hftrain {

class Gemma2 : public RotaryDecoder {
 public:
  struct Options : DecoderOptions {
    Options() {  // Gemma2Config's defaults
      hidden_size = 2304;
      intermediate_size = 9216;
      num_hidden_layers = 26;
      num_attention_heads = 8;
      num_key_value_heads = 4;
      head_dim = 256;
      hidden_act = "gelu_pytorch_tanh";
      tie_word_embeddings = true;
    }
    std::optional<std::string> hidden_activation;  // null = hidden_act
    bool attention_bias = false;
    double query_pre_attn_scalar = 256.0;
    std::optional<int64_t> sliding_window = 4096;
    std::optional<std::vector<std::string>> layer_types;  // null = the family's alternation
    std::optional<double> final_logit_softcapping = 30.0;
    std::optional<double> attn_logit_softcapping = 50.0;
    static void declare(Schema<Options>& s);
  };

  Gemma2(const Options& options, const ModelContext& context);
  static const ModelFamily& declaration();

  // What gemma2 and gemma3_text resolve alike: gemma's norms and embeddings, the sandwich norms, the attention
  // scale, the soft-caps, hidden_activation and the sliding layers (layer i slides when (i + 1) % pattern != 0,
  // unless layer_types says otherwise).
  static DecoderSpec resolve_gemma(Options& o, const ModelContext& context, int64_t pattern);
  // The declaration gemma2 and gemma3_text start from: strict keys, the generation-only keys HF's configs carry.
  static ModelFamily gemma_family(const std::string& type, const std::string& stem);

 private:
  Options options_;
};

// Declares Gemma2::Options' own fields for a family's Options derived from it.
template <class O>
void declare_gemma2_options(Schema<O>& s) {
  declare_decoder_options(s);
  s.template add<std::optional<std::string>>(
      "hidden_activation", &O::hidden_activation,
      "Gate activation of the gated MLP (HF name); null = hidden_act, which must then be gelu_pytorch_tanh.");
  s.template add<bool>("attention_bias", &O::attention_bias, "Biases on q/k/v/o projections.");
  s.template add<double>("query_pre_attn_scalar", &O::query_pre_attn_scalar,
                         "Attention scores are scaled by its inverse square root.")
      .greater_than(0);
  s.template add<std::optional<int64_t>>("sliding_window", &O::sliding_window,
                                         "Keys a query of a sliding layer sees, itself included.");
  s.template add<std::optional<std::vector<std::string>>>(
      "layer_types", &O::layer_types, "Per layer sliding_attention or full_attention; null = the family's alternation.");
  s.template add<std::optional<double>>("final_logit_softcapping", &O::final_logit_softcapping,
                                        "Logits become cap * tanh(logits / cap); null = none.");
  s.template add<std::optional<double>>("attn_logit_softcapping", &O::attn_logit_softcapping,
                                        "Attention scores become cap * tanh(scores / cap) before the mask; null = none.");
}

}  // namespace hftrain
