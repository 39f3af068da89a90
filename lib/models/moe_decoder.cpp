// The MoE families' shared decoder part (see moe_decoder.h).
#include "models/moe_decoder.h"

#include <algorithm>

#include "util/error.h"

namespace hftrain {

ModelOutput MoeDecoder::forward(const Batch& batch) {
  aux_loss_ = torch::Tensor();
  if (!routing_.output_router_logits) return RotaryDecoder::forward(batch);
  struct Recording {  // the blocks record only during this forward, whatever it throws
    RouterRecord& r;
    explicit Recording(RouterRecord& record) : r(record) {
      r.logits.clear();
      r.recording = true;
    }
    ~Recording() {
      r.recording = false;
      r.logits.clear();
    }
  } recording(*record_);
  record_->leaves.clear();
  ModelOutput out = RotaryDecoder::forward(batch);
  if (record_->logits.empty()) return out;  // no routed layer
  std::vector<torch::Tensor> logits = record_->logits;
  if (torch::GradMode::is_enabled() && !logits.front().requires_grad())  // checkpointed layers: see RouterRecord
    for (auto& l : logits) record_->leaves.push_back(l = l.detach().requires_grad_(true));
  const torch::Tensor aux = load_balancing_loss(logits, routing_.experts, routing_.top_k, batch.attention_mask);
  aux_loss_ = aux.detach();
  // HF's XForCausalLM: loss += router_aux_loss_coef * aux_loss when there are labels
  if (out.loss.defined()) out.loss = out.loss + aux.to(out.loss.scalar_type()) * routing_.aux_coef;
  return out;
}

std::vector<std::pair<std::string, double>> MoeDecoder::reported_scalars() const {
  if (!aux_loss_.defined()) return {};
  return {{"aux_loss", aux_loss_.item<double>()}};
}

void MoeDecoder::set_routing(const Routing& routing, const std::string& experts_key) {
  if (routing.top_k > routing.experts)
    throw ConfigError("model.num_experts_per_tok (" + std::to_string(routing.top_k) + ") exceeds " + experts_key + " (" +
                      std::to_string(routing.experts) + ")");
  routing_ = routing;
}

bool qwen_moe_layer(int64_t i, int64_t decoder_sparse_step, const std::optional<std::vector<int64_t>>& mlp_only_layers) {
  if (mlp_only_layers && std::find(mlp_only_layers->begin(), mlp_only_layers->end(), i) != mlp_only_layers->end())
    return false;
  return (i + 1) % decoder_sparse_step == 0;
}

void add_fused_expert_rules(LoadRules& rules, const std::string& file_block, const std::string& model_block,
                            const std::string& gate, const std::string& up, const std::string& down) {
  rules.stacked.push_back({file_block + ".experts.gate_up_proj", model_block + ".experts", {gate + ".weight", up + ".weight"}});
  rules.stacked.push_back({file_block + ".experts.down_proj", model_block + ".experts", {down + ".weight"}});
  if (file_block != model_block) rules.renamed_suffixes.emplace_back("." + file_block + ".gate.weight", "." + model_block + ".gate.weight");
}

}  // namespace hftrain
