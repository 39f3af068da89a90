// The llama-like decoder with routed experts (models/moe) in its layers: what Mixtral, Qwen2-MoE and
// Qwen3-MoE share. The forward adds HF's load-balancing loss (router_aux_loss_coef times
// load_balancing_loss over every MoE layer's router logits, padding left out) to the loss when
// output_router_logits is set, as their XForCausalLM do; the routed options every family declares; the
// loading rule for transformers v5's fused expert tensors. Every training forward also reports the share of the
// routed slots each expert took (`expert_fraction_<e>`, summed over the MoE layers, padding left out).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/moe.h"

namespace hftrain {

class MoeDecoder : public RotaryDecoder {
 public:
  ModelOutput forward(const Batch& batch) override;
  // The last forward's load-balancing loss (before the coefficient); undefined when none was computed.
  const torch::Tensor& aux_loss() const { return aux_loss_; }
  // The last forward's top-k slots per expert [experts] (float64), summed over the MoE layers, padding left out;
  // undefined before any forward or for a model without a routed layer.
  const torch::Tensor& expert_slots() const { return expert_slots_; }
  // {"aux_loss", its value} after a forward that computed it; {expert_fraction_name(e), expert e's share of the
  // slots} for every expert after a forward through routed layers.
  std::vector<std::pair<std::string, double>> reported_scalars() const override;
  // Every routed block runs its share of the experts for the group's tokens in training; ConfigError when the
  // experts do not divide over the group.
  void set_expert_parallel(std::shared_ptr<ExpertParallel> group) override;
  ExpertParallel* expert_parallel() const override { return record_->expert_parallel.get(); }

 protected:
  struct Routing {
    int64_t experts = 0, top_k = 0;
    bool output_router_logits = false;
    double aux_coef = 0.0;
  };
  // Called by the family before build(); `experts_key` names its option of the experts' number in a ConfigError
  // when top_k exceeds it.
  void set_routing(const Routing& routing, const std::string& experts_key);
  const std::shared_ptr<RouterRecord>& router_record() const { return record_; }

 private:
  Routing routing_;
  std::shared_ptr<RouterRecord> record_ = std::make_shared<RouterRecord>();
  torch::Tensor aux_loss_, expert_slots_;
};

// The reported name of expert e's share of the routed slots of a model with `experts` experts: expert_fraction_<e>,
// e zero-padded to the width of the largest index so that the names sort in expert order.
std::string expert_fraction_name(int64_t e, int64_t experts);

// The routed options Mixtral and the Qwen MoE families share, under HF's names, for a family's Options that
// has these members.
template <class O>
void declare_router_options(Schema<O>& s) {
  s.template add<int64_t>("num_experts_per_tok", &O::num_experts_per_tok, "Experts each token is routed to (top-k).").min(1);
  s.template add<bool>("output_router_logits", &O::output_router_logits,
                       "Add router_aux_loss_coef times the load-balancing loss to the loss.");
  s.template add<double>("router_aux_loss_coef", &O::router_aux_loss_coef, "Weight of the load-balancing loss.").min(0);
}

// The Qwen MoE families' layer options (Qwen2-MoE, Qwen3-MoE): num_experts, moe_intermediate_size,
// norm_topk_prob, decoder_sparse_step, mlp_only_layers.
template <class O>
void declare_qwen_moe_options(Schema<O>& s) {
  declare_router_options(s);
  s.template add<int64_t>("num_experts", &O::num_experts, "Routed experts per MoE layer.").min(1);
  s.template add<int64_t>("moe_intermediate_size", &O::moe_intermediate_size, "Each routed expert's inner size.").min(1);
  s.template add<bool>("norm_topk_prob", &O::norm_topk_prob, "Renormalise the top-k router weights to sum to 1.");
  s.template add<int64_t>("decoder_sparse_step", &O::decoder_sparse_step,
                          "Layers i with (i + 1) divisible by this are MoE layers (unless in mlp_only_layers).").min(1);
  s.template add<std::optional<std::vector<int64_t>>>("mlp_only_layers", &O::mlp_only_layers,
                                                      "Layers with the dense gated MLP (intermediate_size); null = none.");
}

// Whether layer i of a Qwen MoE model is routed: not in mlp_only_layers, and (i + 1) a multiple of
// decoder_sparse_step (HF's Qwen2MoeDecoderLayer rule).
bool qwen_moe_layer(int64_t i, int64_t decoder_sparse_step, const std::optional<std::vector<int64_t>>& mlp_only_layers);

// The Qwen MoE families' feed-forward blocks (Qwen2-MoE, Qwen3-MoE): the routed block of their options in the
// layers qwen_moe_layer picks (`shared_expert_size` > 0: Qwen2-MoE's gated shared expert), the dense gated MLP
// of intermediate_size in the others; router logits recorded in `record`.
template <class O>
FeedForwardFactory qwen_moe_feed_forward(const O& o, int64_t shared_expert_size, std::shared_ptr<RouterRecord> record) {
  MoeSpec moe;
  moe.hidden_size = o.hidden_size;
  moe.expert_size = o.moe_intermediate_size;
  moe.experts = o.num_experts;
  moe.top_k = o.num_experts_per_tok;
  moe.normalise_top_k = o.norm_topk_prob;
  moe.hidden_act = o.hidden_act;
  moe.shared_expert_size = shared_expert_size;
  moe.record = std::move(record);
  return [moe, step = o.decoder_sparse_step, dense = o.mlp_only_layers](const DecoderSpec& s, int64_t i) {
    if (qwen_moe_layer(i, step, dense)) return FeedForwardChoice{"mlp", std::make_shared<SparseMoe>(moe)};
    return FeedForwardChoice{"mlp", std::make_shared<GatedMlp>(s.hidden_size, s.intermediate_size, s.hidden_act, false, false)};
  };
}

// transformers v5's layout of a routed block's experts (core_model_loading's MoE conversion): `<block>.experts.
// gate_up_proj` [experts, 2 * inner, hidden] (each expert's gate rows, then its up rows) and `<block>.experts.
// down_proj` [experts, hidden, inner], loaded into the per-expert tensors `<model_block>.experts.E.<gate|up|down>
// .weight`; `file_block` is v5's name of the block ("mlp"), `model_block` hftrain's (HF's hub name).
void add_fused_expert_rules(LoadRules& rules, const std::string& file_block, const std::string& model_block,
                            const std::string& gate, const std::string& up, const std::string& down);

}  // namespace hftrain
