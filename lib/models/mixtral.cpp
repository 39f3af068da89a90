// `mixtral` model (see mixtral.h): mistral's sliding decoder with a routed block in every layer.
#include "models/mixtral.h"

#include "util/error.h"

namespace hftrain {

void Mixtral::Options::declare(Schema<Options>& s) {
  declare_decoder_options(s);
  s.add("sliding_window", &Options::sliding_window, "Keys each query sees, itself included; null = full attention.");
  s.add<int64_t>("num_local_experts", &Options::num_local_experts, "Routed experts per layer.").min(1);
  declare_router_options(s);
  s.add<double>("router_jitter_noise", &Options::router_jitter_noise,
                "In training, the router's input times U(1 - eps, 1 + eps); 0 = none.").min(0).max(1);
}

const ModelFamily& Mixtral::declaration() {
  static const ModelFamily family = [] {
    ModelFamily f = decoder_family("mixtral", "Mixtral");
    add_fused_expert_rules(f.load, "mlp", "block_sparse_moe", "w1", "w3", "w2");
    return f;
  }();
  return family;
}

Mixtral::Mixtral(const Options& options, const ModelContext& context) : options_(options) {
  DecoderSpec spec = resolve_decoder(options_, context);
  const Options& o = options_;
  if (o.sliding_window && *o.sliding_window <= 0)
    throw ConfigError("model.sliding_window: " + std::to_string(*o.sliding_window) + " (a positive window, or null)");
  spec.windows.assign(spec.windows.size(), o.sliding_window.value_or(0));
  set_routing({o.num_local_experts, o.num_experts_per_tok, o.output_router_logits, o.router_aux_loss_coef}, "num_local_experts");
  MoeSpec moe;
  moe.hidden_size = o.hidden_size;
  moe.expert_size = o.intermediate_size;
  moe.experts = o.num_local_experts;
  moe.top_k = o.num_experts_per_tok;
  moe.hidden_act = o.hidden_act;
  moe.gate_name = "w1", moe.up_name = "w3", moe.down_name = "w2";
  moe.jitter_noise = o.router_jitter_noise;
  moe.record = router_record();
  spec.feed_forward = [moe](const DecoderSpec&, int64_t) {
    return FeedForwardChoice{"block_sparse_moe", std::make_shared<SparseMoe>(moe)};
  };
  build(declaration(), options_, spec);
}

}  // namespace hftrain
