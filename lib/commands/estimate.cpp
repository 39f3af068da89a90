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
#include "engine/construction_plan.h"
#include "engine/memory_estimate.h"
#include "engine/precision.h"
#include "models/construction.h"
#include "models/lora.h"
#include "models/quantize_model.h"
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

// The spec as `hftrain train` reads it, with distributed.nproc_per_node auto resolved for this machine.
RunSpec load_estimate_spec(const EstimateRequest& request, const Components& c) {
  std::vector<std::string> overrides = request.overrides;
  if (!request.nproc_per_node.empty()) overrides.push_back("distributed.nproc_per_node=" + request.nproc_per_node);
  RunSpec spec = load_run_spec(request.spec_path, overrides, c.catalog());
  if (spec.distributed.nproc_per_node.automatic) {  // as `hftrain train` would start on this machine
    const WorkerCountChoice choice = choose_worker_count(kCudaBuild, spec.training.use_cpu, process_env, NvmlGpuInventory());
    log_info("distributed.nproc_per_node auto: " + choice.reason);
    spec.distributed.nproc_per_node = WorkerCount{choice.count, false};
  }
  return spec;
}

// The model's trained and frozen tensors from its shapes alone (with PEFT: the adapters train, the base is
// frozen, as PEFT counts them); `dims` gets the trained tensors' shapes.
ModelSize measure_model(const Components& c, const RunSpec& spec, const ModelContext& context,
                        std::vector<std::vector<int64_t>>& dims) {
  ModelSize model;
  check_quantization_plan(spec, /*for_training=*/true);
  if (!spec.peft) {
    for (const auto& p : model_parameter_shapes(c.models, spec.model.type, spec.model.options, context)) {
      model.tensors.emplace_back(p.name, p.numel());
      dims.push_back(p.shape);
    }
    return model;
  }
  MetaConstruction meta;
  std::shared_ptr<Model> built = c.models.build(spec.model.type, spec.model.options, context);
  PeftArgs args = *spec.peft;
  if (spec.model.quantization) {  // the 4-bit or 8-bit base counts by its storage's bytes
    const QuantizationSummary q = quantize_linear_layers(*built, *spec.model.quantization);
    model.quantized_elements = q.weight_elements;
    model.quantized_bytes = q.storage_bytes;
    model.quantized_storage = q.storage_tensors;
    log_info("quantization: " + q.line());
  }
  const AdapterSummary summary = attach_lora(*built, spec.model.type, args, "peft");
  for (const auto& np : built->named_parameters()) {
    if (np.value().scalar_type() == torch::kByte || np.value().scalar_type() == torch::kChar) continue;  // codes: counted above
    if (!np.value().requires_grad()) {
      model.frozen_tensors.emplace_back(np.key(), np.value().numel());
      continue;
    }
    model.tensors.emplace_back(np.key(), np.value().numel());
    dims.push_back(np.value().sizes().vec());
  }
  log_info("peft: " + summary.line());
  return model;
}

// The optimizer's fp32 state elements for the trained tensors' shapes.
int64_t state_elements_of(const Components& c, const RunSpec& spec, const std::vector<std::vector<int64_t>>& dims) {
  const YAML::Node optimizer_options = c.optimizers.dump(spec.optimizer.type, spec.optimizer.options);
  const YAML::Node momentum = lookup(optimizer_options, "momentum"), beta1 = lookup(optimizer_options, "beta1");
  return optimizer_state_elements(spec.optimizer.type, dims, momentum.IsScalar() && momentum.as<double>() != 0.0,
                                  beta1.IsDefined() && !beta1.IsNull());
}

// One row per stage, precision and offload DeepSpeed offers, with DeepSpeed's own estimate where it publishes one.
std::vector<Row> state_rows(const ModelSize& model, const RunSpec& spec, int64_t local, int64_t nodes, int64_t state_elements) {
  std::vector<Row> rows;
  for (int stage = 0; stage <= 3; ++stage)
    for (bool mixed : {false, true})
      for (const char* offload : {"none", "cpu", "nvme"}) {
        if (stage == 0 && std::string(offload) != "none") continue;  // DeepSpeed offloads from stage 1
        StateLayout layout{stage, local * nodes, mixed, offload, stage == 3 && std::string(offload) != "none",
                           spec.zero.stage3_param_persistence_threshold, state_elements,
                           holds_experts_apart(spec, stage) ? spec.distributed.expert_parallel_size : 1};
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
  return rows;
}

// Everything the report prints, gathered by run_estimate.
struct Estimate {
  explicit Estimate(const RunSpec& run_spec) : spec(run_spec) {}
  const RunSpec& spec;
  int64_t local = 1, nodes = 1, world = 1;
  ModelSize model;
  int64_t state_elements = 0;
  int64_t active = 0;  // a mixture of experts: the parameters one token runs through; 0 = dense
  std::vector<Row> rows;
  bool spec_mixed = false;
  std::string spec_offload;
  ActivationShape activation;
  int64_t act_full = 0, act_ckpt = 0;
  int64_t memory_per_rank = 0;
  std::string memory_source;
  const Row* suggestion = nullptr;
  bool suggestion_ckpt = false;

  // This build runs on the CPU: the worker's memory and host memory are the same RAM.
  int64_t ram(const Row& r, bool checkpointing) const {
    return r.bytes.worker + r.bytes.host + (checkpointing ? act_ckpt : act_full);
  }
  bool is_spec_choice(const Row& r) const {
    return r.stage == spec.zero.stage && r.mixed == spec_mixed && r.offload == spec_offload;
  }
};

// --memory-per-rank, or this machine's available memory shared by its local workers.
void choose_memory_per_rank(Estimate& e, const std::string& requested) {
  if (!requested.empty()) {
    e.memory_per_rank = static_cast<int64_t>(parse_size(requested, "--memory-per-rank"));
    e.memory_source = "--memory-per-rank";
    return;
  }
  e.memory_per_rank = available_memory() / std::max<int64_t>(1, e.local);
  e.memory_source = "this machine's available memory / " + std::to_string(e.local) + " local worker" + (e.local == 1 ? "" : "s");
}

// Cheapest first: no offload and no recomputation, stage by stage; then with gradient checkpointing;
// then NVMe offload (stages 1-3) with checkpointing. The precision stays the spec's (it changes results).
void choose_suggestion(Estimate& e) {
  for (int pass = 0; pass < 3 && !e.suggestion; ++pass)
    for (const Row& r : e.rows) {
      const bool ckpt = pass > 0 || e.spec.training.gradient_checkpointing;
      if (r.mixed != e.spec_mixed || r.offload != (pass == 2 ? "nvme" : "none")) continue;
      if (e.memory_per_rank > 0 && e.ram(r, ckpt) <= e.memory_per_rank) {
        e.suggestion = &r;
        e.suggestion_ckpt = ckpt;
        break;
      }
    }
}

void print_json(const Estimate& e) {
  json out = {{"model_type", e.spec.model.type},
              {"parameters", e.model.parameters()},
              {"frozen_parameters", e.model.frozen_elements()},
              {"quantized_parameters", e.model.quantized_elements},
              {"quantized_bytes", e.model.quantized_bytes},
              {"largest_layer_parameters", e.model.largest_layer()},
              {"active_parameters", e.active > 0 ? json(e.active) : json()},
              {"optimizer", e.spec.optimizer.type},
              {"optimizer_state_elements", e.state_elements},
              {"world_size", e.world},
              {"gpus_per_node", e.local},
              {"memory_per_rank", e.memory_per_rank},
              {"activations", {{"batch", e.activation.batch}, {"sequence", e.activation.sequence}, {"bytes", e.act_full},
                               {"bytes_with_gradient_checkpointing", e.act_ckpt}}}};
  json list = json::array();
  for (const Row& r : e.rows) {
    json j = {{"stage", r.stage}, {"precision", r.mixed ? "bf16" : "fp32"}, {"offload", r.offload},
              {"params", r.bytes.params}, {"grads", r.bytes.grads}, {"master", r.bytes.master},
              {"optimizer", r.bytes.optimizer}, {"worker", r.bytes.worker}, {"host", r.bytes.host},
              {"nvme", r.bytes.nvme}, {"spec_choice", e.is_spec_choice(r)}};
    if (r.has_deepspeed) j["deepspeed"] = {{"gpu", r.deepspeed.gpu}, {"cpu_per_node", r.deepspeed.cpu}};
    list.push_back(j);
  }
  out["rows"] = list;
  out["suggestion"] = e.suggestion ? json{{"stage", e.suggestion->stage}, {"offload", e.suggestion->offload},
                                          {"gradient_checkpointing", e.suggestion_ckpt},
                                          {"bytes", e.ram(*e.suggestion, e.suggestion_ckpt)}}
                                   : json();
  std::cout << out.dump(2) << std::endl;
}

// The heading: the model, the optimizer, the workers and the memory per rank.
void print_heading(std::ostream& o, const Estimate& e, const Unit& u) {
  const Unit mu = unit_for(e.memory_per_rank);
  o << "model: " << e.spec.model.type << ", " << thousands(e.model.parameters()) << " parameters in " << e.model.tensors.size()
    << " tensors" << (e.model.frozen_elements() ? " trained, " + thousands(e.model.frozen_elements()) + " frozen" : std::string())
    << (e.model.quantized_elements ? " (" + thousands(e.model.quantized_elements) + " in " + (e.spec.model.quantization && e.spec.model.quantization->load_in_8bit ? "8" : "4") + " bits: " +
                                         thousands(e.model.quantized_bytes) + " bytes)" : std::string())
    << (e.active > 0 ? ", " + thousands(e.active) + " active per token" : std::string())
    << " (largest module " << thousands(e.model.largest_layer()) << "); optimizer " << e.spec.optimizer.type << " ("
    << thousands(e.state_elements) << " fp32 state elements)\n";
  o << "workers: " << e.world << " (" << e.local << " per node x " << e.nodes << " node" << (e.nodes == 1 ? "" : "s")
    << "); memory per rank: " << in_unit(e.memory_per_rank, mu) << " " << mu.name << " (" << e.memory_source << ")\n\n";
  o << u.name << " per rank. hftrain: what the engine holds (worker = the worker's own memory; host / nvme = offloaded).\n"
       "DeepSpeed: its estimate_zero2/zero3_model_states_mem_needs formulas (16-bit Adam, per GPU / per node's CPU).\n\n";
}

void print_rows(std::ostream& o, const Estimate& e, const Unit& u) {
  auto size = [&](int64_t bytes) { return in_unit(bytes, u); };
  o << "  stage precision offload |  params   grads  master optimizer |  worker    host    nvme | DeepSpeed gpu  cpu/node\n";
  for (const Row& r : e.rows) {
    char line[256];
    std::snprintf(line, sizeof line, "%s %-5d %-9s %-7s | %7s %7s %7s %9s | %7s %7s %7s | ", e.is_spec_choice(r) ? "*" : " ",
                  r.stage, r.mixed ? "bf16" : "fp32", r.offload.c_str(), size(r.bytes.params).c_str(),
                  size(r.bytes.grads).c_str(), size(r.bytes.master).c_str(), size(r.bytes.optimizer).c_str(),
                  size(r.bytes.worker).c_str(), size(r.bytes.host).c_str(), size(r.bytes.nvme).c_str());
    o << line << (r.has_deepspeed ? size(r.deepspeed.gpu) + "  " + size(r.deepspeed.cpu) : std::string("-")) << "\n";
  }
  o << "(* = the spec's choice; stage 3 offload moves the parameter shards too)\n\n";
}

// Activations, whether the spec's choice fits, and the cheapest configuration that does.
void print_verdict(std::ostream& o, const Estimate& e, const Unit& u) {
  auto size = [&](int64_t bytes) { return in_unit(bytes, u); };
  const bool ckpt = e.spec.training.gradient_checkpointing;
  o << "activations per rank (batch " << e.activation.batch << " x " << e.activation.sequence << " tokens, Korthikanti et al. "
    << "2022): " << size(e.act_full) << " " << u.name << "; with gradient checkpointing: " << size(e.act_ckpt) << " " << u.name << "\n";
  o << "this build runs on the CPU: the worker's memory and host memory are the same RAM, so cpu offload saves none of it\n";
  for (const Row& r : e.rows)
    if (e.is_spec_choice(r)) {
      const int64_t need = e.ram(r, ckpt);
      o << "the spec's choice (stage " << r.stage << ", " << (r.mixed ? "bf16" : "fp32") << ", offload " << r.offload
        << (ckpt ? ", gradient checkpointing" : "") << "): " << size(need) << " " << u.name << " per rank: "
        << (e.memory_per_rank <= 0 ? "memory per rank unknown" : need <= e.memory_per_rank ? "fits" : "does NOT fit") << "\n";
    }
  const Unit mu = unit_for(e.memory_per_rank);
  if (e.suggestion)
    o << "cheapest configuration that fits: zero.stage " << e.suggestion->stage << ", offload " << e.suggestion->offload
      << (e.suggestion_ckpt ? ", training.gradient_checkpointing true" : "") << " ("
      << size(e.ram(*e.suggestion, e.suggestion_ckpt)) << " " << u.name << " per rank)\n";
  else
    o << "no configuration at this precision fits " << in_unit(e.memory_per_rank, mu) << " " << mu.name
      << " per rank: add workers (--nproc-per-node / --nnodes) or lower per_device_train_batch_size\n";
}

}  // namespace

int run_estimate(const EstimateRequest& request) {
  const Components& c = builtin_components();
  const RunSpec spec = load_estimate_spec(request, c);
  Estimate e(spec);
  e.local = spec.distributed.nproc_per_node.count;
  e.nodes = std::max(1, request.nnodes);
  e.world = e.local * e.nodes;

  // The sizes a model takes from its data, then the shapes: nothing of the model is allocated.
  const std::unique_ptr<DataSource> data = c.data.build(spec.data.type, spec.data.options, DataUse{});
  const DataShape shape = data->shape();
  const ModelContext context{shape.vocab_size, shape.max_length, shape.num_labels, shape.num_features, shape.label_names};
  std::vector<std::vector<int64_t>> dims;
  e.model = measure_model(c, spec, context, dims);
  e.state_elements = state_elements_of(c, spec, dims);
  e.rows = state_rows(e.model, spec, e.local, e.nodes, e.state_elements);
  e.spec_mixed = precision_policy(spec).training.enabled();
  e.spec_offload = spec.zero.offload_optimizer.device;

  const YAML::Node top_k = lookup(c.models.dump(spec.model.type, spec.model.options), "num_experts_per_tok");
  if (top_k.IsScalar()) e.active = e.model.active_elements(top_k.as<int64_t>());  // a mixture of experts
  const ModelDimensions sizes = c.models.facts(spec.model.type, spec.model.options);
  e.activation = ActivationShape{sizes.layers, sizes.hidden_size, sizes.attention_heads,
                                 std::max<int64_t>(1, shape.max_length), spec.training.per_device_train_batch_size, e.spec_mixed};
  e.act_full = activation_bytes(e.activation, false);
  e.act_ckpt = activation_bytes(e.activation, true);
  choose_memory_per_rank(e, request.memory_per_rank);
  choose_suggestion(e);

  if (request.json) {
    print_json(e);
    return 0;
  }
  int64_t largest = 0;
  for (const Row& r : e.rows) largest = std::max({largest, r.bytes.total(), r.deepspeed.gpu, r.deepspeed.cpu});
  const Unit u = unit_for(largest);
  std::ostringstream o;
  print_heading(o, e, u);
  print_rows(o, e, u);
  print_verdict(o, e, u);
  std::cout << o.str();
  return 0;
}

}  // namespace hftrain
