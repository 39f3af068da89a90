// Per-rank memory estimates (see memory_estimate.h). The hftrain figures follow what
// ZeroEngine allocates (docs/distributed.md "The engine"); the DeepSpeed figures are its
// published estimator formulas, kept separate so that the two can be compared.
#include "engine/memory_estimate.h"

#include <algorithm>
#include <map>
#include <set>

#include "models/expert_names.h"
#include "util/error.h"

namespace hftrain {

int64_t ModelSize::parameters() const {
  int64_t n = 0;
  for (const auto& [name, numel] : tensors) n += numel;
  return n;
}

int64_t ModelSize::frozen_elements() const {
  int64_t n = quantized_elements;
  for (const auto& [name, numel] : frozen_tensors) n += numel;
  return n;
}

int64_t ModelSize::largest_layer() const {
  std::map<std::string, int64_t> per_module;
  for (const auto& [name, numel] : tensors) per_module[name.substr(0, name.rfind('.') == std::string::npos ? 0 : name.rfind('.'))] += numel;
  int64_t largest = 0;
  for (const auto& [module, numel] : per_module) largest = std::max(largest, numel);
  return largest;
}

int64_t ModelSize::routed_expert_elements() const {
  int64_t n = 0;
  for (const auto& [name, numel] : tensors) n += routed_expert_name(name).expert >= 0 ? numel : 0;
  return n;
}

int64_t ModelSize::active_elements(int64_t experts_per_token) const {
  struct Block {
    std::set<int64_t> experts;
    int64_t elements = 0;
  };
  std::map<std::string, Block> blocks;  // by the name before ".experts."
  int64_t all = 0;
  for (const auto* list : {&tensors, &frozen_tensors})
    for (const auto& [name, numel] : *list) {
      all += numel;
      const RoutedExpertName routed = routed_expert_name(name);
      if (routed.expert < 0) continue;
      Block& b = blocks[routed.block];
      b.experts.insert(routed.expert);
      b.elements += numel;
    }
  for (const auto& [block, b] : blocks) {
    const auto n = static_cast<int64_t>(b.experts.size());
    all -= b.elements / n * std::max<int64_t>(0, n - experts_per_token);
  }
  return all;
}

namespace {

// One rank's bytes of a quantised base: stage 3 keeps 1/world of each storage tensor at or above the persistence
// threshold (its elements, as a parameter's), whole below it and at stages 0-2.
int64_t quantized_held(const ModelSize& model, const StateLayout& layout) {
  if (layout.stage != 3 || model.quantized_storage.empty()) return model.quantized_bytes;
  const int64_t n = std::max<int64_t>(1, layout.world_size);
  int64_t bytes = 0;
  for (const auto& [numel, size] : model.quantized_storage)
    bytes += numel < layout.persistence_threshold ? size : (size + n - 1) / n;
  return bytes;
}

}  // namespace

StateBytes estimate_state_bytes(const ModelSize& model, const StateLayout& layout) {
  const int64_t n = std::max<int64_t>(1, layout.world_size);
  const int64_t psi = model.parameters();
  const int64_t p = layout.mixed_precision ? 2 : 4;  // bytes per parameter and gradient element
  auto share = [&](int64_t elements) { return (elements + n - 1) / n; };  // one rank's partition, padded up
  StateBytes b;
  // Stage 3: partitions, and whole copies of the tensors below the persistence threshold; the frozen
  // parameters (an adapter's base, in 16 bits with mixed precision) are partitioned the same way.
  auto held = [&](const std::vector<std::pair<std::string, int64_t>>& tensors) {
    int64_t all = 0, whole = 0;
    for (const auto& [name, numel] : tensors) {
      all += numel;
      if (numel < layout.persistence_threshold) whole += numel;
    }
    return layout.stage == 3 ? share(all - whole) + whole : all;
  };
  // Expert data parallelism (stages 1-2): a rank holds its member's 1/ep of the routed experts' parameters (and at
  // stage 1 their full-size gradients); partitions are as before, each group's over its holders.
  const int64_t elsewhere = layout.expert_parallel_size > 1 && (layout.stage == 1 || layout.stage == 2)
                                ? model.routed_expert_elements() - model.routed_expert_elements() / layout.expert_parallel_size
                                : 0;
  b.params = (held(model.tensors) - elsewhere + held(model.frozen_tensors)) * p + quantized_held(model, layout);
  b.grads = (layout.stage >= 2 ? share(psi) : psi - elsewhere) * p;
  // fp32 runs update the parameters (or their partition) in place: no separate master copy.
  const int64_t owned = layout.stage >= 1 ? share(psi) : psi;
  b.master = layout.mixed_precision ? owned * 4 : 0;
  b.optimizer = (layout.stage >= 1 ? share(layout.optimizer_state_elements) : layout.optimizer_state_elements) * 4;
  const int64_t offloaded = layout.offload == "none" ? 0 : b.master + b.optimizer + (layout.offload_param ? b.params : 0);
  b.worker = b.total() - offloaded;
  (layout.offload == "nvme" ? b.nvme : b.host) = offloaded;
  return b;
}

int64_t optimizer_state_elements(const std::string& optimizer, const std::vector<std::vector<int64_t>>& shapes,
                                 bool sgd_momentum, bool adafactor_beta1) {
  int64_t total = 0;
  for (const auto& shape : shapes) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    if (optimizer == "adamw" || optimizer == "adam") {
      total += 2 * numel;
    } else if (optimizer == "lion" || optimizer == "adagrad") {
      total += numel;
    } else if (optimizer == "sgd") {
      total += sgd_momentum ? numel : 0;
    } else if (optimizer == "adamw_8bit") {  // two 1-byte moments (+ a float per 2048-block) from 4096 elements
      total += numel >= 4096 ? (2 * numel + 8 * ((numel + 2047) / 2048) + 3) / 4 : 2 * numel;
    } else if (optimizer == "lomo") {
      // no state
    } else if (optimizer == "adalomo") {  // Adafactor's factored second moment, no first moment
      if (shape.size() >= 2) {
        total += numel / shape.back() + numel / shape[shape.size() - 2];
      } else {
        total += numel;
      }
    } else if (optimizer.rfind("galore_", 0) == 0) {
      throw ConfigError("hftrain estimate: optimizer '" + optimizer +
                        "' keeps state in the projected shape of the training.optim_target_modules weights, which the "
                        "estimate does not model yet; estimate with adamw (an upper bound) or measure a short run");
    } else if (optimizer == "adafactor") {  // factored second moment for matrices (rows + columns)
      if (shape.size() >= 2) {
        const int64_t rows = numel / shape.back(), cols = numel / shape[shape.size() - 2];
        total += rows + cols;
      } else {
        total += numel;
      }
      if (adafactor_beta1) total += numel;
    }
  }
  return total;
}

DeepSpeedEstimate deepspeed_zero2_estimate(int64_t params, int64_t gpus_per_node, int64_t nodes, bool cpu_offload) {
  const double psi = static_cast<double>(params), buffer = 1.5;
  const int64_t gpus = gpus_per_node * nodes;
  if (cpu_offload)
    return {2 * params, static_cast<int64_t>(psi * static_cast<double>(std::max<int64_t>(4 * gpus, 16)) * buffer)};
  return {2 * params + static_cast<int64_t>(18.0 * psi / static_cast<double>(gpus)),
          static_cast<int64_t>(psi * 4.0 * static_cast<double>(gpus_per_node) * buffer)};
}

DeepSpeedEstimate deepspeed_zero3_estimate(int64_t params, int64_t largest_layer, int64_t gpus_per_node, int64_t nodes,
                                           bool cpu_offload, bool cpu_offload_params) {
  const double psi = static_cast<double>(params), buffer = 1.5, per_node = 1.0 / static_cast<double>(nodes);
  const int64_t gpus = gpus_per_node * nodes, largest_layer_memory = 4 * largest_layer;
  if (cpu_offload && cpu_offload_params)
    return {largest_layer_memory, static_cast<int64_t>(psi * 18.0 * per_node * buffer)};
  if (cpu_offload)
    return {largest_layer_memory + static_cast<int64_t>(2.0 * psi / static_cast<double>(gpus)),
            static_cast<int64_t>(psi * 16.0 * per_node * buffer)};
  return {largest_layer_memory + static_cast<int64_t>(18.0 * psi / static_cast<double>(gpus)),
          static_cast<int64_t>(static_cast<double>(largest_layer) * 4.0 * static_cast<double>(gpus_per_node) * buffer)};
}

int64_t activation_bytes(const ActivationShape& a, bool gradient_checkpointing) {
  if (a.layers <= 0 || a.hidden <= 0) return 0;
  const double s = static_cast<double>(a.sequence), b = static_cast<double>(a.batch), h = static_cast<double>(a.hidden);
  const double heads = static_cast<double>(std::max<int64_t>(1, a.heads));
  const double scale = a.mixed_precision ? 1.0 : 2.0;  // the paper counts 16-bit activations
  const double per_layer = s * b * h * (34.0 + 5.0 * heads * s / h) * scale;
  if (!gradient_checkpointing) return static_cast<int64_t>(per_layer * static_cast<double>(a.layers));
  const double input = s * b * h * (a.mixed_precision ? 2.0 : 4.0);
  return static_cast<int64_t>(input * static_cast<double>(a.layers) + per_layer);
}

}  // namespace hftrain
