// The MoE families' shared decoder part (see moe_decoder.h).
#include "models/moe_decoder.h"

#include <algorithm>

#include "util/error.h"

namespace hftrain {

namespace {

// The blocks count their experts' slots, and record their router logits when the loss needs them, during one
// forward of the model only, whatever it throws (not in backward's recomputation of a checkpointed layer).
class RecordingScope {
 public:
  RecordingScope(RouterRecord& record, const Batch& batch, bool logits) : r_(record) {
    r_.logits.clear();
    r_.recording = logits;
    r_.counting = true;
    r_.expert_slots = torch::Tensor();
    if (batch.attention_mask.defined()) r_.token_mask = batch.attention_mask.reshape({-1});
  }
  ~RecordingScope() {
    r_.recording = r_.counting = false;
    r_.logits.clear();
    r_.token_mask = r_.expert_slots = torch::Tensor();
  }

 private:
  RouterRecord& r_;
};

}  // namespace

ModelOutput MoeDecoder::forward(const Batch& batch) {
  aux_loss_ = expert_slots_ = torch::Tensor();
  RecordingScope recording(*record_, batch, routing_.output_router_logits);
  record_->leaves.clear();
  ModelOutput out = RotaryDecoder::forward(batch);
  expert_slots_ = record_->expert_slots;
  if (record_->logits.empty()) return out;  // no load-balancing loss asked for, or no routed layer
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
  std::vector<std::pair<std::string, double>> scalars;
  if (aux_loss_.defined()) scalars.emplace_back("aux_loss", aux_loss_.item<double>());
  if (expert_slots_.defined()) {
    const double total = expert_slots_.sum().item<double>();  // 0 when every token was padding
    const auto experts = expert_slots_.size(0);
    const double* slots = expert_slots_.data_ptr<double>();
    for (int64_t e = 0; e < experts; ++e)
      scalars.emplace_back(expert_fraction_name(e, experts), total > 0 ? slots[e] / total : 0.0);
  }
  return scalars;
}

void MoeDecoder::set_expert_parallel(std::shared_ptr<ExpertParallel> group) {
  if (const std::string problem = group->experts_problem(routing_.experts); !problem.empty())
    throw ConfigError(problem + " (model type " + family()->model_type + ")");
  group->set_experts(routing_.experts);
  record_->expert_parallel = std::move(group);
}

std::string expert_fraction_name(int64_t e, int64_t experts) {
  const std::string index = std::to_string(e), widest = std::to_string(std::max<int64_t>(experts - 1, 0));
  return "expert_fraction_" + std::string(widest.size() > index.size() ? widest.size() - index.size() : 0, '0') + index;
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
