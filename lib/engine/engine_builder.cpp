// The run's engine from its spec, in ordered steps (see engine_builder.h).
#include "engine/engine_builder.h"

#include <functional>
#include <utility>
#include <vector>

#include "checkpoint/model_io.h"
#include "engine/construction_plan.h"
#include "models/expert_parallel.h"
#include "models/quantize_model.h"

namespace hftrain {
namespace {

using BuildStep = std::function<void(const EngineRequest&, EngineSettings&)>;

// The engine's buffers, masters and optimizer state live where the model was placed; with NVMe offload
// the optimizer state (and masters) live in swap files through host memory.
void place_on_device(const EngineRequest& r, EngineSettings& c) { c.device = r.device; }

void precision_and_clipping(const EngineRequest& r, EngineSettings& c) {
  c.stage = static_cast<int>(r.spec.zero.stage);
  c.max_grad_norm = r.spec.training.max_grad_norm;
  c.bucket_cap_mb = r.spec.distributed.ddp_bucket_cap_mb;
  c.precision = r.precision.training;
}

void optimizer_capabilities(const EngineRequest& r, EngineSettings& c) {
  c.optimizer_type = r.spec.optimizer.type;
  c.optimizer_traits = r.optimizer_traits;
}

// A quantised base (QLoRA): the codes are frozen parameters, their scales frozen storage beside them.
void frozen_storage(const EngineRequest& r, EngineSettings& c) { c.frozen_storage = quantized_storage(*r.model); }

// ZeRO-3: parameters are gathered per module, so the model names its gather units; the frozen ones (an
// adapter's base) are partitioned and gathered too.
void gather_units(const EngineRequest& r, EngineSettings& c) {
  if (c.stage != 3) return;
  std::vector<std::string> trainable, frozen;
  for (const auto& np : r.model->named_parameters()) (np.value().requires_grad() ? trainable : frozen).push_back(np.key());
  for (const auto& named : c.frozen_storage) frozen.push_back(named.first);  // gathered with the unit that reads it
  c.gather_units = resolve_gather_units(*r.model, trainable);
  if (!frozen.empty()) c.frozen_gather_units = resolve_gather_units(*r.model, frozen);
  c.persistence_threshold = r.spec.zero.stage3_param_persistence_threshold;
  c.gather_limits = CoordinatorLimits{r.spec.zero.stage3_prefetch_bucket_size, r.spec.zero.stage3_max_live_parameters};
  c.gather_16bit_weights_on_model_save = r.spec.zero.stage3_gather_16bit_weights_on_model_save;
}

// zero.Init: the model was built without holding its parameters; the engine keeps each value's partition
// only, from the model's own initialisation or from the pretrained files.
void sharded_construction(const EngineRequest& r, EngineSettings& c) {
  if (c.stage != 3 || !r.model->initialisation_deferred()) return;
  c.initial_values = [model = r.model, files = r.deferred_weights](const InitialValueVisitor& visit) {
    model->materialise_parameters([&](const std::string& name, const torch::Tensor& init) {
      if (!files || !files->sources.count(name))  // initialised here (no pretrained weights, or a fresh head)
        return visit(name, [&](int64_t begin, int64_t count) { return init.reshape({-1}).narrow(0, begin, count); });
      const bool keep = visit(name, [&](int64_t begin, int64_t count) { return files->read(name, begin, count).to(torch::kFloat); });
      if (keep) init.copy_(files->read(name).view(init.sizes()));  // not trained: whole, from the file
      return keep;
    });
  };
}

// zero.offload_optimizer / offload_param device nvme: optimizer state (and masters, shards) in swap files.
void nvme_offload(const EngineRequest& r, EngineSettings& c) {
  const ZeroArgs& zero = r.spec.zero;
  if (zero.offload_optimizer.device != "nvme") return;
  SwapOptions swap;
  swap.swap_dir = zero.offload_optimizer.nvme_path;
  swap.buffer_count = static_cast<int>(zero.offload_optimizer.buffer_count);
  swap.sub_group_size = zero.sub_group_size;
  swap.aio = AioOptions{zero.aio.block_size, static_cast<int>(zero.aio.queue_depth), zero.aio.overlap_events};
  swap.parameter_shards = zero.offload_param == "nvme";
  c.nvme_offload = swap;
}

// zero.offload_optimizer device cpu with parameters on a GPU: the fp32 masters and optimizer state live in host
// memory and the update runs there (DeepSpeed's ZeRO-Offload with its CPU Adam). On the CPU nothing moves.
void host_offload(const EngineRequest& r, EngineSettings& c) {
  c.offload_to_host = r.spec.zero.offload_optimizer.device == "cpu" && !r.device.is_cpu();
}

// Expert parallelism at stages 1-2: each member's experts in flat groups held by its expert-data-parallel ranks.
void expert_data_parallelism(const EngineRequest& r, EngineSettings& c) {
  ExpertParallel* experts = r.model->expert_parallel();
  if (!holds_experts_apart(r.spec) || !experts || !r.expert_data_group) return;
  c.expert_data_group = r.expert_data_group;
  c.expert_parallel_size = experts->size();
  c.member_of = [experts](const std::string& name) { return experts->member_of_parameter(name); };
}

const std::vector<std::pair<const char*, BuildStep>>& build_steps() {
  static const std::vector<std::pair<const char*, BuildStep>> steps = {
      {"place on device", place_on_device},
      {"precision and clipping", precision_and_clipping},
      {"optimizer capabilities", optimizer_capabilities},
      {"frozen storage", frozen_storage},
      {"zero-3 gather units", gather_units},
      {"sharded construction", sharded_construction},
      {"nvme offload", nvme_offload},
      {"host offload", host_offload},
      {"expert data parallelism", expert_data_parallelism},
  };
  return steps;
}

}  // namespace

EngineSettings engine_config_for(const EngineRequest& request) {
  EngineSettings config;
  for (const auto& [name, step] : build_steps()) step(request, config);
  return config;
}

std::unique_ptr<Engine> build_engine(const EngineRequest& request) {
  const EngineSettings config = engine_config_for(request);
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (auto& np : request.model->named_parameters()) named.emplace_back(np.key(), np.value());
  auto engine = make_engine(config, named, make_param_groups(named, request.spec.training.weight_decay),
                            request.build_optimizer, request.comm);
  request.model->set_gather_hooks(engine->gather_hooks());
  if (config.expert_data_group) request.model->expert_parallel()->set_sharded(true);  // other members' experts hold nothing here
  return engine;
}

}  // namespace hftrain
