// `qwen2_moe` model (see qwen2_moe.h): qwen2's decoder with routed experts and a gated shared expert.
#include "models/qwen2_moe.h"

namespace hftrain {

void Qwen2Moe::Options::declare(Schema<Options>& s) {
  declare_decoder_options(s);
  s.add("qkv_bias", &Options::qkv_bias, "Biases on the q/k/v projections.");
  declare_qwen_window_options(s);
  declare_qwen_moe_options(s);
  s.add<int64_t>("shared_expert_intermediate_size", &Options::shared_expert_intermediate_size,
                 "The shared expert's inner size.").min(1);
}

const ModelFamily& Qwen2Moe::declaration() {
  static const ModelFamily family = [] {
    ModelFamily f = decoder_family("qwen2_moe", "Qwen2Moe");
    f.lora_target_modules.clear();  // PEFT has no default LoRA targets for qwen2_moe
    add_fused_expert_rules(f.load, "mlp", "mlp", "gate_proj", "up_proj", "down_proj");
    return f;
  }();
  return family;
}

namespace {

// Qwen2MoeConfig's layer types when config.json gives none: with use_sliding_window, the even layers below
// max_window_layers slide.
std::optional<std::vector<std::string>> qwen2_moe_layer_types(const Qwen2Moe::Options& o) {
  if (o.layer_types || !o.use_sliding_window) return o.layer_types;
  std::vector<std::string> types;
  for (int64_t i = 0; i < o.num_hidden_layers; ++i)
    types.push_back(i % 2 == 0 && i < o.max_window_layers ? "sliding_attention" : "full_attention");
  return types;
}

}  // namespace

Qwen2Moe::Qwen2Moe(const Options& options, const ModelContext& context) : options_(options) {
  DecoderSpec spec = resolve_decoder(options_, context);
  const Options& o = options_;
  spec.q_bias = spec.k_bias = spec.v_bias = o.qkv_bias;
  spec.windows = qwen_layer_windows(o.num_hidden_layers, o.use_sliding_window, o.sliding_window, o.max_window_layers,
                                    qwen2_moe_layer_types(o));
  set_routing({o.num_experts, o.num_experts_per_tok, o.output_router_logits, o.router_aux_loss_coef}, "num_experts");
  spec.feed_forward = qwen_moe_feed_forward(o, o.shared_expert_intermediate_size, router_record());
  build(declaration(), options_, spec);
}

}  // namespace hftrain
