// `hftrain estimate` (see estimate.h): the spec is validated as `hftrain train` validates it, the data
// source is built for the sizes the model takes from it (vocabulary, sequence length, labels), and the
// model's parameter shapes come from its own module tree built on the meta device, so no model tensor is
// allocated, and its layers / width / heads from the family's declared dimensions (Model::Facts).
#include "commands/estimate.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "builtins/register_builtins.h"
#include "commands/zero_to_fp32.h"
#include "distributed/devices.h"
#include "log/logger.h"
#include "log/run_summary.h"
#include "engine/memory_estimate.h"
#include "engine/precision.h"
#include "models/construction.h"
#include "models/lora.h"
#include "util/error.h"
#include "util/torch_compat.h"

namespace hftrain {
namespace {

using json = nlohmann::json;

// A binary unit that shows `largest` with a few digits before the point.
struct Unit {
  const char* name;
  double bytes;
};
Unit unit_for(int64_t largest) {
  if (largest >= (1LL << 30)) return {"GiB", 1073741824.0};
  if (largest >= (1LL << 20)) return {"MiB", 1048576.0};
  return {"KiB", 1024.0};
}
std::string in_unit(int64_t bytes, const Unit& u) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(bytes) / u.bytes);
  return buf;
}


// MemAvailable of /proc/meminfo in bytes (0 when unreadable).
int64_t available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

struct Row {
  int stage;
  bool mixed;
  std::string offload;
  StateBytes bytes;
  DeepSpeedEstimate deepspeed;  // zeros where DeepSpeed publishes no estimator (stages 0, 1)
  bool has_deepspeed;
};

}  // namespace

int run_estimate(const EstimateRequest& request) {
  const Components& c = builtin_components();
  std::vector<std::string> overrides = request.overrides;
  if (!request.nproc_per_node.empty()) overrides.push_back("distributed.nproc_per_node=" + request.nproc_per_node);
  RunSpec spec = load_run_spec(request.spec_path, overrides, c.catalog());
  if (spec.distributed.nproc_per_node.automatic) {  // as `hftrain train` would start on this machine
    const WorkerCountChoice choice = choose_worker_count(kCudaBuild, spec.training.use_cpu, process_env, NvmlGpuInventory());
    log_info("distributed.nproc_per_node auto: " + choice.reason);
    spec.distributed.nproc_per_node = WorkerCount{choice.count, false};
  }
  const int64_t local = spec.distributed.nproc_per_node.count, nodes = std::max(1, request.nnodes), world = local * nodes;

  // The sizes a model takes from its data, then the shapes: nothing of the model is allocated.
  const std::unique_ptr<DataSource> data = c.data.build(spec.data.type, spec.data.options, DataUse{});
  const DataShape shape = data->shape();
  const ModelContext context{shape.vocab_size, shape.max_length, shape.num_labels, shape.num_features, shape.label_names};
  ModelSize model;
  std::vector<std::vector<int64_t>> dims;
  if (spec.peft) {  // the adapters train; the base is frozen (PEFT's counts, from shapes alone)
    MetaConstruction meta;
    std::shared_ptr<Model> built = c.models.build(spec.model.type, spec.model.options, context);
    PeftArgs args = *spec.peft;
    const AdapterSummary summary = attach_lora(*built, spec.model.type, args, "peft");
    for (const auto& np : built->named_parameters()) {
      if (!np.value().requires_grad()) {
        model.frozen_tensors.emplace_back(np.key(), np.value().numel());
        continue;
      }
      model.tensors.emplace_back(np.key(), np.value().numel());
      dims.push_back(np.value().sizes().vec());
    }
    log_info("peft: " + summary.line());
  } else {
    for (const auto& p : model_parameter_shapes(c.models, spec.model.type, spec.model.options, context)) {
      model.tensors.emplace_back(p.name, p.numel());
      dims.push_back(p.shape);
    }
  }
  const YAML::Node optimizer_options = c.optimizers.dump(spec.optimizer.type, spec.optimizer.options);
  const YAML::Node momentum = lookup(optimizer_options, "momentum"), beta1 = lookup(optimizer_options, "beta1");
  const int64_t state_elements =
      optimizer_state_elements(spec.optimizer.type, dims, momentum.IsScalar() && momentum.as<double>() != 0.0,
                               beta1.IsDefined() && !beta1.IsNull());

  const bool spec_mixed = precision_policy(spec).training.enabled();
  const std::string spec_offload = spec.zero.offload_optimizer.device;
  std::vector<Row> rows;
  for (int stage = 0; stage <= 3; ++stage)
    for (bool mixed : {false, true})
      for (const char* offload : {"none", "cpu", "nvme"}) {
        if (stage == 0 && std::string(offload) != "none") continue;  // DeepSpeed offloads from stage 1
        StateLayout layout{stage, world, mixed, offload, stage == 3 && std::string(offload) != "none",
                           spec.zero.stage3_param_persistence_threshold, state_elements};
        Row row{stage, mixed, offload, estimate_state_bytes(model, layout), {}, false};
        if (mixed && stage == 2 && std::string(offload) != "nvme") {
          row.deepspeed = deepspeed_zero2_estimate(model.parameters(), local, nodes, std::string(offload) == "cpu");
          row.has_deepspeed = true;
        } else if (mixed && stage == 3 && std::string(offload) != "nvme") {
          const bool cpu = std::string(offload) == "cpu";
          row.deepspeed = deepspeed_zero3_estimate(model.parameters(), model.largest_layer(), local, nodes, cpu, cpu);
          row.has_deepspeed = true;
        }
        rows.push_back(row);
      }

  const ModelDimensions sizes = c.models.facts(spec.model.type, spec.model.options);
  ActivationShape activation{sizes.layers, sizes.hidden_size, sizes.attention_heads,
                             std::max<int64_t>(1, shape.max_length), spec.training.per_device_train_batch_size, spec_mixed};
  const int64_t act_full = activation_bytes(activation, false), act_ckpt = activation_bytes(activation, true);

  int64_t memory_per_rank = 0;
  std::string memory_source;
  if (!request.memory_per_rank.empty()) {
    memory_per_rank = static_cast<int64_t>(parse_size(request.memory_per_rank, "--memory-per-rank"));
    memory_source = "--memory-per-rank";
  } else {
    memory_per_rank = available_memory() / std::max<int64_t>(1, local);
    memory_source = "this machine's available memory / " + std::to_string(local) + " local worker" + (local == 1 ? "" : "s");
  }

  // This build runs on the CPU: the worker's memory and host memory are the same RAM.
  auto ram = [&](const Row& r, bool checkpointing) { return r.bytes.worker + r.bytes.host + (checkpointing ? act_ckpt : act_full); };
  auto is_spec_choice = [&](const Row& r) {
    return r.stage == spec.zero.stage && r.mixed == spec_mixed && r.offload == spec_offload;
  };
  // Cheapest first: no offload and no recomputation, stage by stage; then with gradient checkpointing;
  // then NVMe offload (stages 1-3) with checkpointing. The precision stays the spec's (it changes results).
  const Row* suggestion = nullptr;
  bool suggestion_ckpt = false;
  for (int pass = 0; pass < 3 && !suggestion; ++pass)
    for (const Row& r : rows) {
      const bool ckpt = pass > 0 || spec.training.gradient_checkpointing;
      if (r.mixed != spec_mixed || r.offload != (pass == 2 ? "nvme" : "none")) continue;
      if (memory_per_rank > 0 && ram(r, ckpt) <= memory_per_rank) {
        suggestion = &r;
        suggestion_ckpt = ckpt;
        break;
      }
    }

  if (request.json) {
    json out = {{"model_type", spec.model.type},
                {"parameters", model.parameters()},
                {"frozen_parameters", model.frozen_elements()},
                {"largest_layer_parameters", model.largest_layer()},
                {"optimizer", spec.optimizer.type},
                {"optimizer_state_elements", state_elements},
                {"world_size", world},
                {"gpus_per_node", local},
                {"memory_per_rank", memory_per_rank},
                {"activations", {{"batch", activation.batch}, {"sequence", activation.sequence}, {"bytes", act_full},
                                 {"bytes_with_gradient_checkpointing", act_ckpt}}}};
    json list = json::array();
    for (const Row& r : rows) {
      json j = {{"stage", r.stage}, {"precision", r.mixed ? "bf16" : "fp32"}, {"offload", r.offload},
                {"params", r.bytes.params}, {"grads", r.bytes.grads}, {"master", r.bytes.master},
                {"optimizer", r.bytes.optimizer}, {"worker", r.bytes.worker}, {"host", r.bytes.host},
                {"nvme", r.bytes.nvme}, {"spec_choice", is_spec_choice(r)}};
      if (r.has_deepspeed) j["deepspeed"] = {{"gpu", r.deepspeed.gpu}, {"cpu_per_node", r.deepspeed.cpu}};
      list.push_back(j);
    }
    out["rows"] = list;
    out["suggestion"] = suggestion ? json{{"stage", suggestion->stage}, {"offload", suggestion->offload},
                                          {"gradient_checkpointing", suggestion_ckpt}, {"bytes", ram(*suggestion, suggestion_ckpt)}}
                                   : json();
    std::cout << out.dump(2) << std::endl;
    return 0;
  }

  int64_t largest = 0;
  for (const Row& r : rows) largest = std::max({largest, r.bytes.total(), r.deepspeed.gpu, r.deepspeed.cpu});
  const Unit u = unit_for(largest);
  auto size = [&](int64_t bytes) { return in_unit(bytes, u); };
  std::ostringstream o;
  o << "model: " << spec.model.type << ", " << thousands(model.parameters()) << " parameters in " << model.tensors.size()
    << " tensors" << (model.frozen_elements() ? " trained, " + thousands(model.frozen_elements()) + " frozen" : std::string())
    << " (largest module " << thousands(model.largest_layer()) << "); optimizer " << spec.optimizer.type << " ("
    << thousands(state_elements) << " fp32 state elements)\n";
  o << "workers: " << world << " (" << local << " per node x " << nodes << " node" << (nodes == 1 ? "" : "s")
    << "); memory per rank: " << in_unit(memory_per_rank, unit_for(memory_per_rank)) << " " << unit_for(memory_per_rank).name << " (" << memory_source << ")\n\n";
  o << u.name << " per rank. hftrain: what the engine holds (worker = the worker's own memory; host / nvme = offloaded).\n"
       "DeepSpeed: its estimate_zero2/zero3_model_states_mem_needs formulas (16-bit Adam, per GPU / per node's CPU).\n\n";
  o << "  stage precision offload |  params   grads  master optimizer |  worker    host    nvme | DeepSpeed gpu  cpu/node\n";
  for (const Row& r : rows) {
    char line[256];
    std::snprintf(line, sizeof line, "%s %-5d %-9s %-7s | %7s %7s %7s %9s | %7s %7s %7s | ", is_spec_choice(r) ? "*" : " ",
                  r.stage, r.mixed ? "bf16" : "fp32", r.offload.c_str(), size(r.bytes.params).c_str(),
                  size(r.bytes.grads).c_str(), size(r.bytes.master).c_str(), size(r.bytes.optimizer).c_str(),
                  size(r.bytes.worker).c_str(), size(r.bytes.host).c_str(), size(r.bytes.nvme).c_str());
    o << line << (r.has_deepspeed ? size(r.deepspeed.gpu) + "  " + size(r.deepspeed.cpu) : std::string("-")) << "\n";
  }
  o << "(* = the spec's choice; stage 3 offload moves the parameter shards too)\n\n";
  o << "activations per rank (batch " << activation.batch << " x " << activation.sequence << " tokens, Korthikanti et al. "
    << "2022): " << size(act_full) << " " << u.name << "; with gradient checkpointing: " << size(act_ckpt) << " " << u.name << "\n";
  o << "this build runs on the CPU: the worker's memory and host memory are the same RAM, so cpu offload saves none of it\n";
  for (const Row& r : rows)
    if (is_spec_choice(r)) {
      const int64_t need = ram(r, spec.training.gradient_checkpointing);
      o << "the spec's choice (stage " << r.stage << ", " << (r.mixed ? "bf16" : "fp32") << ", offload " << r.offload
        << (spec.training.gradient_checkpointing ? ", gradient checkpointing" : "") << "): " << size(need) << " " << u.name
        << " per rank: "
        << (memory_per_rank <= 0 ? "memory per rank unknown" : need <= memory_per_rank ? "fits" : "does NOT fit") << "\n";
    }
  if (suggestion)
    o << "cheapest configuration that fits: zero.stage " << suggestion->stage << ", offload " << suggestion->offload
      << (suggestion_ckpt ? ", training.gradient_checkpointing true" : "") << " (" << size(ram(*suggestion, suggestion_ckpt))
      << " " << u.name << " per rank)\n";
  else
    o << "no configuration at this precision fits " << in_unit(memory_per_rank, unit_for(memory_per_rank)) << " "
      << unit_for(memory_per_rank).name
      << " per rank: add workers (--nproc-per-node / --nnodes) or lower per_device_train_batch_size\n";
  std::cout << o.str();
  return 0;
}

}  // namespace hftrain
