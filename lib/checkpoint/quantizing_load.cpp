// Loading an HF directory into a deferred model, quantising each selected linear layer as its weight arrives
// (see quantizing_load.h).
#include "checkpoint/quantizing_load.h"

#include <map>
#include <optional>

#include "checkpoint/model_io.h"
#include "models/adaptable_linear.h"
#include "models/quantize_model.h"
#include "models/quantized_state.h"
#include "util/error.h"

namespace hftrain {

int64_t load_pretrained_quantizing(const std::string& dir, Model& model, const QuantizationArgs& args) {
  if (!model.initialisation_deferred())
    throw RuntimeFailure("quantising " + (dir.empty() ? std::string("the model") : dir) +
                         " as it is built: the model was built whole, not deferred");
  torch::NoGradGuard no_grad;
  std::optional<PretrainedPlan> plan;
  if (!dir.empty()) plan.emplace(plan_pretrained_dir(dir, model));
  if (plan)
    for (auto& nb : model.named_buffers())  // buffers are built whole; only parameters are deferred
      if (plan->sources.count(nb.key())) nb.value().copy_(plan->read(nb.key()).view(nb.value().sizes()));
  // A checkpoint saved quantised selects its layers by its own quantization_config and brings their codes.
  const bool saved_quantised = plan && plan->quantization;
  const QuantizationArgs& selecting = saved_quantised ? *plan->quantization : args;
  const QuantSettings settings = quant_settings(selecting);
  std::map<std::string, AdaptableLinearImpl*> layers;  // by weight name
  for (const auto& [name, linear] : quantizable_layers(model, selecting)) layers.emplace(name + ".weight", linear);
  int64_t quantised = 0;
  model.materialise_parameters([&](const std::string& name, const torch::Tensor& value) {
    const auto layer = layers.find(name);
    if (layer != layers.end() && saved_quantised) {
      AdaptableLinearImpl& linear = *layer->second;
      linear.quantize_base(quantized_weight_from_state(name, plan->read_quantized(name), settings, linear.out_features(),
                                                       linear.in_features(), dir));
      ++quantised;
      return true;  // the parameter now holds the packed codes
    }
    if (plan && plan->sources.count(name)) torch::Tensor(value).copy_(plan->read(name).view(value.sizes()));
    if (layer != layers.end()) {
      layer->second->quantize_base(settings);  // the float weight gives way to its codes
      ++quantised;
    }
    return true;
  });
  return quantised;
}

}  // namespace hftrain
