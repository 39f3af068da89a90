// The model's construction for its engine (see construction_plan.h).
#include "engine/construction_plan.h"

#include <filesystem>

#include "log/logger.h"
#include "runspec/spec_rules.h"
#include "util/error.h"

namespace hftrain {
namespace {

// Adapters attach to a built base (peft, or model.peft_adapter): its frozen weights stay whole.
bool adapter_run(const RunSpec& spec) { return spec.peft || !spec.model.peft_adapter.empty(); }

bool hf_directory(const RunSpec& spec) {
  return !spec.model.from_pretrained.empty() && std::filesystem::exists(spec.model.from_pretrained + "/config.json");
}

}  // namespace

ConstructionPlan plan_construction(const RunSpec& spec, bool for_training) {
  ConstructionPlan plan;
  const bool stage3 = spec.zero.stage == 3;
  plan.parameters_sharded = stage3 || (for_training && holds_experts_apart(spec));
  plan.partitions_adapters = for_training && stage3;
  // zero.Init: an HF model directory is read rank by rank later (bare weights are loaded whole).
  // (An adapter run builds its base whole: the adapters are attached to the built model.)
  const bool peft = adapter_run(spec);
  const bool asked = for_training && stage3 && spec.zero.zero3_init_flag;
  if (asked && peft)
    log_info("zero.zero3_init_flag: the base model is built whole on each rank (adapters attach to the built model)");
  plan.sharded_init = asked && !peft;
  plan.deferred = plan.sharded_init && (spec.model.from_pretrained.empty() || hf_directory(spec));
  return plan;
}

bool holds_experts_apart(const RunSpec& spec, int64_t stage) {
  return spec.distributed.expert_parallel_size > 1 && (stage == 1 || stage == 2) && !adapter_run(spec);
}

std::shared_ptr<const PretrainedPlan> deferred_weights(const ConstructionPlan& plan, const RunSpec& spec, Model& model) {
  const bool hf_dir = hf_directory(spec);
  if (!model.initialisation_deferred()) {
    if (plan.sharded_init)
      log_info("zero.zero3_init_flag: the model is built whole on each rank, then partitioned (" +
               std::string(spec.model.from_pretrained.empty()
                               ? "model type '" + spec.model.type + "' does not build itself unit by unit"
                               : "model.from_pretrained holds bare weights without config.json") + ")");
    return nullptr;
  }
  log_info("zero.zero3_init_flag: sharded construction (each unit's parameters released as built; each rank "
           "keeps only its partition of the " + std::string(hf_dir ? "pretrained weights, read from " +
           spec.model.from_pretrained : "initial values") + ")");
  if (!hf_dir) return nullptr;
  auto files = std::make_shared<PretrainedPlan>(plan_pretrained_dir(spec.model.from_pretrained, model));
  torch::NoGradGuard no_grad;
  for (auto& nb : model.named_buffers())  // buffers are built whole; only parameters are deferred
    if (files->sources.count(nb.key())) nb.value().copy_(files->read(nb.key()).view(nb.value().sizes()));
  return files;
}

void note_adapters(const ConstructionPlan& plan) {
  if (plan.partitions_adapters)
    log_info("zero.stage 3: the adapters and the frozen base are partitioned and gathered per module; the base gets "
             "no gradients, master weights or optimizer state");
}

void check_engine_device(const RunSpec& spec, torch::Device device) {
  // Beside parameters on a GPU the optimizer state can go to host memory (the engine's host offload); NVMe swap
  // files and parameter offload are built for parameters that are themselves on the host.
  const bool beyond_host_offload = spec.zero.offload_optimizer.device == "nvme" || spec.zero.offload_param != "none";
  if (!device.is_cpu() && beyond_host_offload)
    throw ConfigError("zero.offload_optimizer nvme / zero.offload_param: offload from a GPU to NVMe or of the parameters "
                      "is not built yet, and this worker computes on " + device.str() +
                      "; use zero.offload_optimizer cpu with zero.offload_param none (or training.use_cpu: true to "
                      "train on the CPU with these)");
  if (device.is_cpu() && (spec.precision.fp16 || spec.training.fp16_full_eval))  // a CUDA build's CPU worker
    throw ConfigError(std::string(spec.precision.fp16 ? "precision.fp16: " : "training.fp16_full_eval: ") + kFp16NeedsCuda);
}

}  // namespace hftrain
