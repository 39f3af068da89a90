// `qwen3_moe` model (see qwen3_moe.h): qwen3's decoder with routed experts.
#include "models/qwen3_moe.h"

namespace hftrain {

void Qwen3Moe::Options::declare(Schema<Options>& s) {
  declare_decoder_options(s);
  s.add("attention_bias", &Options::attention_bias, "Biases on q/k/v/o projections.");
  declare_qwen_window_options(s);
  declare_qwen_moe_options(s);
}

const ModelFamily& Qwen3Moe::declaration() {
  static const ModelFamily family = [] {
    ModelFamily f = decoder_family("qwen3_moe", "Qwen3Moe");
    f.lora_target_modules.clear();  // PEFT has no default LoRA targets for qwen3_moe
    add_fused_expert_rules(f.load, "mlp", "mlp", "gate_proj", "up_proj", "down_proj");
    return f;
  }();
  return family;
}

Qwen3Moe::Qwen3Moe(const Options& options, const ModelContext& context) : options_(options) {
  DecoderSpec spec = resolve_decoder(options_, context);
  const Options& o = options_;
  spec.q_bias = spec.k_bias = spec.v_bias = spec.o_bias = o.attention_bias;
  spec.qk_norm = true;
  spec.windows = qwen_layer_windows(o.num_hidden_layers, o.use_sliding_window, o.sliding_window, o.max_window_layers,
                                    o.layer_types);
  set_routing({o.num_experts, o.num_experts_per_tok, o.output_router_logits, o.router_aux_loss_coef}, "num_experts");
  spec.feed_forward = qwen_moe_feed_forward(o, 0, router_record());
  build(declaration(), options_, spec);
}

}  // namespace hftrain
