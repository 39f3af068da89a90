// Reading an Accelerate config file into the run spec (see accelerate_config.h). The keys and what each
// becomes are declared in accelerate_keys.cpp; this file checks the values and places them, following
// accelerate launch's own rules (num_processes is the total over all machines, deepspeed_config is read
// only with distributed_type DEEPSPEED and fsdp_config only with FSDP, deepspeed_config_file excludes the
// settings it holds).
#include <algorithm>
#include <filesystem>
#include <sstream>

#include "config/duplicate_keys.h"
#include "config/schema.h"
#include "runspec/accelerate_config.h"
#include "runspec/accelerate_keys.h"
#include "runspec/hf_names.h"
#include "util/fs.h"

namespace hftrain {
namespace {

using namespace accelerate;
namespace fs = std::filesystem;

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

// A value that asks for nothing: null, {} / [], false or "no".
bool says_nothing(const YAML::Node& v) {
  if (!v.IsDefined() || v.IsNull()) return true;
  if (!v.IsScalar()) return v.size() == 0;
  const std::string t = upper(v.Scalar());
  return t.empty() || t == "FALSE" || t == "NO";
}

class AccelerateReader {
 public:
  AccelerateReader(YAML::Node& root, Issues& issues, Issues& file, std::map<std::string, std::string>& origins,
                   std::vector<std::string>& notes, AccelerateLaunch& out)
      : root_(root), issues_(issues), file_(file), origins_(origins), notes_(notes), out_(out) {}

  void read(const YAML::Node& config) {
    check_keys("", config);
    read_distributed_type(lookup(config, "distributed_type"), config);
    if (YAML::Node env = lookup(config, "compute_environment"); env.IsDefined() && !env.IsNull() &&
                                                               yaml_text(env) != "LOCAL_MACHINE")
      problem("compute_environment", env, "'" + yaml_text(env) + "': only LOCAL_MACHINE is available (SageMaker "
                                          "launching is not)");
    const YAML::Node mixed = lookup(config, "mixed_precision");
    read_mixed_precision(mixed);
    if (YAML::Node cpu = lookup(config, "use_cpu"); cpu.IsDefined() && !cpu.IsNull()) {
      bool b = false;
      if (!ValueTraits<bool>::parse(cpu, b)) problem("use_cpu", cpu, "expected true or false");
      else place("use_cpu", cpu, "training", "use_cpu", YAML::Node(b), yaml_text(cpu));
    }
    if (type_ == "MULTI_CPU") place("distributed_type", lookup(config, "distributed_type"), "training", "use_cpu",
                                    YAML::Node(true), "MULTI_CPU");
    read_layout(config);
    const YAML::Node ds = lookup(config, "deepspeed_config"), fsdp = lookup(config, "fsdp_config");
    if (expect_map("deepspeed_config", ds)) {
      check_keys("deepspeed_config", ds);
      if (type_ == "DEEPSPEED") read_deepspeed(ds, mixed);
      else if (!says_nothing(ds)) unused("deepspeed_config", "DEEPSPEED");
    }
    if (expect_map("fsdp_config", fsdp)) {
      check_keys("fsdp_config", fsdp);
      if (type_ == "FSDP") read_fsdp(fsdp, lookup(config, "distributed_type"));
      else if (!says_nothing(fsdp)) unused("fsdp_config", "FSDP");
    } else if (type_ == "FSDP") {
      read_fsdp(YAML::Node(YAML::NodeType::Map), lookup(config, "distributed_type"));
    }
    if (type_ == "DEEPSPEED" && !ds.IsDefined()) read_deepspeed(YAML::Node(YAML::NodeType::Map), mixed);
    if (const YAML::Node parallelism = lookup(config, "parallelism_config"); expect_map("parallelism_config", parallelism)) {
      check_keys("parallelism_config", parallelism);
      read_parallelism(parallelism);
    }
  }

 private:
  void problem(const std::string& written, const YAML::Node& at, const std::string& message) {
    if (at.IsDefined()) file_.add(written, at, message);
    else file_.add(written, message);
  }
  void note(const std::string& written, const std::string& text) {
    notes_.push_back("accelerate config " + written + ": " + text);
  }
  void unused(const std::string& block, const std::string& type) {
    note(block, "not used: distributed_type is " + type_ + ", and accelerate launch reads it only with " + type);
  }

  // Puts `value` at section.key, written as the Accelerate key `written` at `at`.
  void place(const std::string& written, const YAML::Node& at, const std::string& section, const std::string& key,
             const YAML::Node& value, const std::string& shown) {
    place_setting(root_, issues_, origins_, section, key, value, shown, SettingSource{"accelerate " + written, at, file_});
  }
  void launch(const std::string& field, const std::string& written, const YAML::Node& at) {
    out_.origins[field] = "accelerate " + written + ": " + yaml_text(at) + " (" + file_.position(at) + ")";
  }

  bool expect_map(const std::string& written, const YAML::Node& v) {
    if (!v.IsDefined() || v.IsNull()) return false;
    if (v.IsMap()) return true;
    problem(written, v, "expected a mapping of settings");
    return false;
  }

  // Every key of `block`: unknown ones are errors (Accelerate raises too), accepted ones logged with their
  // reason when they ask for something, refused ones errors unless they ask for nothing.
  void check_keys(const std::string& block, const YAML::Node& map) {
    if (!map.IsMap()) {
      if (block.empty()) problem("", map, "an Accelerate config must be a mapping of settings");
      return;
    }
    const std::string prefix = block.empty() ? "" : block + ".";
    for (const auto& kv : map) {
      std::string name = kv.first.Scalar();
      for (const auto& [old_name, new_name] : kRenamedFsdpKeys)
        if (block == "fsdp_config" && name == old_name) name = new_name;
      const Key* key = find_key(block, name);
      if (!key) {
        problem(prefix + name, kv.first, "unknown key" + did_you_mean(name, names_in(block)) +
                                             (block.empty() ? " (Accelerate's ClusterConfig refuses it too)" : ""));
      } else if (key->treatment == Treatment::accepted && !says_nothing(kv.second)) {
        note(prefix + name, yaml_text(kv.second) + " accepted with no effect: " + key->text);
      } else if (key->treatment == Treatment::refused && !is_neutral(*key, kv.second)) {
        problem(prefix + name, kv.second, "'" + yaml_text(kv.second) + "': " + key->text);
      }
    }
  }

  // ParallelismConfig's sequence-parallel size (Ulysses); the rest is checked against the key table.
  void read_parallelism(const YAML::Node& parallelism) {
    const std::string written = "parallelism_config.parallelism_config_sp_size";
    const YAML::Node sp = lookup(parallelism, "parallelism_config_sp_size");
    int64_t size = 1;
    if (sp.IsDefined() && !sp.IsNull() && read_int(written, sp, 1, 1 << 20, size))
      place(written, sp, "distributed", "sequence_parallel_size", YAML::Node(size), yaml_text(sp));
  }

  bool read_int(const std::string& written, const YAML::Node& v, int64_t lo, int64_t hi, int64_t& out) {
    if (!ValueTraits<int64_t>::parse(v, out) || out < lo || out > hi) {
      problem(written, v, "'" + yaml_text(v) + "' is not an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      return false;
    }
    return true;
  }

  void read_distributed_type(const YAML::Node& v, const YAML::Node& config) {
    static const std::vector<std::string> kBuilt = {"NO", "MULTI_GPU", "MULTI_CPU", "DEEPSPEED", "FSDP"};
    static const std::vector<std::string> kOthers = {"MEGATRON_LM", "XLA", "TPU", "MULTI_NPU", "MULTI_MLU", "MULTI_MUSA",
                                                     "MULTI_XPU", "MULTI_HPU", "MULTI_SDAA"};
    if (!v.IsDefined() || v.IsNull()) {
      problem("distributed_type", config, "required key is missing (Accelerate requires it too): NO, MULTI_GPU, "
                                          "MULTI_CPU, DEEPSPEED or FSDP");
      return;
    }
    const std::string t = v.IsScalar() ? v.Scalar() : "";
    if (std::find(kBuilt.begin(), kBuilt.end(), t) != kBuilt.end()) {
      type_ = t;
    } else if (t == "MEGATRON_LM") {
      problem("distributed_type", v, "'MEGATRON_LM': Megatron-LM tensor / pipeline parallelism is not available");
    } else if (std::find(kOthers.begin(), kOthers.end(), t) != kOthers.end()) {
      problem("distributed_type", v, "'" + t + "': TPU / NPU / MLU / MUSA / XPU / HPU devices are not available; hftrain "
                                                "runs on the CPU (and CUDA GPUs)");
    } else {
      std::vector<std::string> all = kBuilt;
      all.insert(all.end(), kOthers.begin(), kOthers.end());
      problem("distributed_type", v, "'" + yaml_text(v) + "' is not a distributed type" + did_you_mean(t, all));
    }
  }

  void read_mixed_precision(const YAML::Node& v) {
    if (!v.IsDefined() || v.IsNull()) return;
    const std::string m = v.IsScalar() ? v.Scalar() : "";
    if (m == "fp8") return problem("mixed_precision", v, "'fp8': FP8 training is not available (bf16 is)");
    if (m != "no" && m != "bf16" && m != "fp16")
      return problem("mixed_precision", v, "'" + yaml_text(v) + "' is not one of no, fp16, bf16, fp8" +
                                               did_you_mean(m, {"no", "fp16", "bf16", "fp8"}));
    place("mixed_precision", v, "precision", "bf16", YAML::Node(m == "bf16"), m);
    place("mixed_precision", v, "precision", "fp16", YAML::Node(m == "fp16"), m);
  }

  // num_processes (all machines), num_machines, machine_rank, the rendezvous address and the GPU ids.
  void read_layout(const YAML::Node& config) {
    int64_t machines = 1, rank = 0, procs = -1;
    const YAML::Node m = lookup(config, "num_machines"), r = lookup(config, "machine_rank"),
                     p = lookup(config, "num_processes");
    if (m.IsDefined() && !m.IsNull() && read_int("num_machines", m, 1, 1 << 20, machines)) {
      out_.nnodes = static_cast<int>(machines);
      launch("nnodes", "num_machines", m);
    }
    if (r.IsDefined() && !r.IsNull() && read_int("machine_rank", r, 0, machines - 1, rank)) {
      out_.node_rank = static_cast<int>(rank);
      launch("node_rank", "machine_rank", r);
    }
    const YAML::Node own = lookup(lookup(root_, "distributed"), "nproc_per_node");
    const bool cli_count = own.IsDefined() && issues_.where("distributed.nproc_per_node", own).rfind("--set", 0) == 0;
    if (p.IsDefined() && !p.IsNull() && !(p.IsScalar() && p.Scalar() == "-1")) {
      if (read_int("num_processes", p, 1, 1 << 20, procs)) {
        if (type_ == "NO") {
          place("distributed_type", lookup(config, "distributed_type"), "distributed", "nproc_per_node", YAML::Node(1),
                "NO (one process)");
          if (procs > 1) note("num_processes", yaml_text(p) + " with distributed_type NO: one process, as accelerate "
                                                              "launch's simple launcher starts");
        } else if (procs % machines != 0) {
          problem("num_processes", p, yaml_text(p) + " is not a multiple of num_machines " + std::to_string(machines) +
                                          " (it is the total over all machines; accelerate launch would start " +
                                          std::to_string(procs / machines) + " per machine)");
        } else {
          place("num_processes", p, "distributed", "nproc_per_node", YAML::Node(procs / machines),
                yaml_text(p) + " / num_machines " + std::to_string(machines));
        }
      }
    } else if (!cli_count) {
      problem("num_processes", p.IsDefined() ? p : config,
              "-1 (or absent): give the number of processes (over all machines), or --nproc-per-node (Accelerate: "
              "\"You need to manually pass in `--num_processes` using this config yaml\")");
    }
    if (YAML::Node ip = lookup(config, "main_process_ip"); ip.IsDefined() && !ip.IsNull()) {
      if (!ip.IsScalar() || ip.Scalar().empty()) problem("main_process_ip", ip, "expected node 0's address");
      else out_.master_addr = ip.Scalar(), launch("master_addr", "main_process_ip", ip);
    }
    if (YAML::Node port = lookup(config, "main_process_port"); port.IsDefined() && !port.IsNull()) {
      int64_t n = 0;
      if (read_int("main_process_port", port, 0, 65535, n) && n > 0)
        out_.master_port = static_cast<int>(n), launch("master_port", "main_process_port", port);
    }
    if (YAML::Node rdzv = lookup(config, "rdzv_backend"); rdzv.IsDefined() && !rdzv.IsNull()) {
      const std::string b = yaml_text(rdzv);
      if (b == "static" || b == "c10d") out_.rdzv_backend = b, launch("rdzv_backend", "rdzv_backend", rdzv);
      else if (b == "etcd" || b == "etcd-v2") problem("rdzv_backend", rdzv, "'" + b + "': an etcd rendezvous is not available "
                                                                         "(static and c10d meet at node 0's address)");
      else problem("rdzv_backend", rdzv, "'" + b + "' is not a rendezvous backend" + did_you_mean(b, {"static", "c10d", "etcd"}));
    }
    if (YAML::Node ids = lookup(config, "gpu_ids"); ids.IsDefined() && !ids.IsNull()) read_gpu_ids(ids, machines);
  }

  void read_gpu_ids(const YAML::Node& ids, int64_t machines) {
    const std::string text = yaml_text(ids);
    if (text == "all") return;
    std::stringstream in(text);
    int count = 0;
    for (std::string id; std::getline(in, id, ',');) {
      ++count;
      if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
        return problem("gpu_ids", ids, "'" + text + "' is not 'all' or a comma-separated list of GPU indices");
    }
    if (type_ == "MULTI_GPU" && machines <= 1 && count < 2)
      return problem("gpu_ids", ids, "'" + text + "': multi-GPU training on one machine needs at least two ids or all "
                                                  "(as accelerate launch requires)");
    out_.gpu_ids = text;
    launch("gpu_ids", "gpu_ids", ids);
  }

  // A deepspeed_config value that is set (not null, "none" or "auto", which leave the setting to others).
  static bool given(const YAML::Node& v) {
    return v.IsDefined() && !v.IsNull() && !(v.IsScalar() && (v.Scalar() == "none" || v.Scalar() == "auto"));
  }

  void read_deepspeed(const YAML::Node& ds, const YAML::Node& mixed) {
    const YAML::Node file = lookup(ds, "deepspeed_config_file");
    if (given(file)) {
      bool clash = false;
      for (const auto& key : kOwnedByDeepSpeedFile)
        if (YAML::Node v = lookup(ds, key); v.IsDefined()) {
          clash = true;
          problem("deepspeed_config." + key, v, "set beside deepspeed_config_file, which holds it: give it in the "
                                                "DeepSpeed JSON (accelerate refuses both, as its config variables would be ignored)");
        }
      if (mixed.IsDefined() && !mixed.IsNull()) {
        clash = true;
        problem("mixed_precision", mixed, "set beside deepspeed_config.deepspeed_config_file, which holds it (fp16 / bf16 "
                                          "in the JSON): remove it here (accelerate refuses both)");
      }
      if (!clash) read_deepspeed_file(file);
    } else {
      read_zero_settings(ds);
    }
    if (YAML::Node init = lookup(ds, "zero3_init_flag"); given(init)) bool_setting("deepspeed_config.zero3_init_flag", init, "zero", "zero3_init_flag");
  }

  void read_deepspeed_file(const YAML::Node& file) {
    fs::path path = file.Scalar();
    if (path.is_relative() && !fs::exists(path)) {  // as given (the current directory), else beside the Accelerate file
      const fs::path beside = fs::path(file_.file()).parent_path() / path;
      if (fs::exists(beside)) path = beside;
    }
    place("deepspeed_config.deepspeed_config_file", file, "training", "deepspeed", YAML::Node(path.string()), file.Scalar());
  }

  void bool_setting(const std::string& written, const YAML::Node& v, const std::string& section, const std::string& key) {
    bool b = false;
    if (!ValueTraits<bool>::parse(v, b)) return problem(written, v, "expected true or false");
    place(written, v, section, key, YAML::Node(b), yaml_text(v));
  }

  void read_zero_settings(const YAML::Node& ds) {
    int64_t stage = -1;
    const YAML::Node zero = lookup(root_, "zero");
    if (YAML::Node s = lookup(ds, "zero_stage"); given(s)) {
      if (read_int("deepspeed_config.zero_stage", s, 0, 3, stage)) place("deepspeed_config.zero_stage", s, "zero", "stage", YAML::Node(stage), yaml_text(s));
    } else if (!lookup(zero, "stage").IsDefined()) {
      stage = 2;  // DeepSpeedPlugin's default
      place("deepspeed_config.zero_stage", lookup(ds, "zero_stage"), "zero", "stage", YAML::Node(2), "absent, 2 (DeepSpeedPlugin's default)");
    } else {
      ValueTraits<int64_t>::parse(lookup(zero, "stage"), stage);
    }
    if (YAML::Node v = lookup(ds, "gradient_accumulation_steps"); given(v)) {
      int64_t n = 0;
      if (read_int("deepspeed_config.gradient_accumulation_steps", v, 1, 1 << 30, n))
        place("deepspeed_config.gradient_accumulation_steps", v, "training", "gradient_accumulation_steps", YAML::Node(n), yaml_text(v));
    }
    if (YAML::Node v = lookup(ds, "gradient_clipping"); given(v)) {
      double d = 0;
      if (!ValueTraits<double>::parse(v, d) || d < 0) problem("deepspeed_config.gradient_clipping", v, "expected a non-negative number");
      else place("deepspeed_config.gradient_clipping", v, "training", "max_grad_norm", v, yaml_text(v));
    }
    const std::vector<std::string> devices = {"none", "cpu", "nvme"};
    if (YAML::Node v = lookup(ds, "offload_optimizer_device"); v.IsDefined() && !v.IsNull()) {
      if (std::find(devices.begin(), devices.end(), yaml_text(v)) == devices.end()) {
        problem("deepspeed_config.offload_optimizer_device", v, "expected none, cpu or nvme");
      } else {
        if (YAML::Node own = lookup(zero, "offload_optimizer"); own.IsScalar()) {  // the spec's `offload_optimizer: cpu`
          YAML::Node expanded(YAML::NodeType::Map);
          expanded["device"] = own;
          root_["zero"]["offload_optimizer"] = expanded;
        }
        place("deepspeed_config.offload_optimizer_device", v, "zero.offload_optimizer", "device", v, yaml_text(v));
      }
    }
    if (YAML::Node v = lookup(ds, "offload_optimizer_nvme_path"); given(v))
      place("deepspeed_config.offload_optimizer_nvme_path", v, "zero.offload_optimizer", "nvme_path", v, yaml_text(v));
    if (YAML::Node v = lookup(ds, "offload_param_device"); v.IsDefined() && !v.IsNull()) {
      if (std::find(devices.begin(), devices.end(), yaml_text(v)) == devices.end())
        problem("deepspeed_config.offload_param_device", v, "expected none, cpu or nvme");
      else if (stage == 3)
        place("deepspeed_config.offload_param_device", v, "zero", "offload_param", v, yaml_text(v));
      else if (yaml_text(v) != "none")
        note("deepspeed_config.offload_param_device", yaml_text(v) + " at ZeRO stage " + std::to_string(stage) +
                                                          ": no effect (DeepSpeed offloads parameters only at stage 3)");
    }
    if (YAML::Node v = lookup(ds, "zero3_save_16bit_model"); given(v))
      bool_setting("deepspeed_config.zero3_save_16bit_model", v, "zero", "stage3_gather_16bit_weights_on_model_save");
  }

  // FSDP's sharding is ZeRO's: FULL_SHARD = stage 3, SHARD_GRAD_OP = 2, NO_SHARD = 0 (hf_names' FSDP table).
  void read_fsdp(const YAML::Node& f, const YAML::Node& type_node) {
    auto at = [&](const std::string& name) {
      YAML::Node v = lookup(f, name);
      for (const auto& [old_name, new_name] : kRenamedFsdpKeys)
        if (new_name == name && !v.IsDefined() && lookup(f, old_name).IsDefined()) {
          note(old_name, "the older name of " + new_name + " (as Accelerate reads it)");
          v = lookup(f, old_name);
        }
      return v;
    };
    const YAML::Node strategy = at("fsdp_sharding_strategy"), reshard = at("fsdp_reshard_after_forward");
    if (given(strategy) && given(reshard)) {
      problem("fsdp_config.fsdp_reshard_after_forward", reshard, "and fsdp_sharding_strategy (" + file_.position(strategy) +
                                                                     ") both choose the sharding; give only one");
    } else if (given(strategy)) {
      sharding("fsdp_config.fsdp_sharding_strategy", strategy);
    } else if (given(reshard)) {
      bool b = false;
      if (ValueTraits<bool>::parse(reshard, b)) place("fsdp_config.fsdp_reshard_after_forward", reshard, "zero", "stage", YAML::Node(b ? 3 : 2), yaml_text(reshard));
      else sharding("fsdp_config.fsdp_reshard_after_forward", reshard);
    } else if (!lookup(lookup(root_, "zero"), "stage").IsDefined()) {
      place("distributed_type", type_node, "zero", "stage", YAML::Node(3), "FSDP, fsdp_sharding_strategy absent: FULL_SHARD");
    }
    if (YAML::Node v = at("fsdp_offload_params"); given(v)) {
      bool b = false;
      if (!ValueTraits<bool>::parse(v, b)) problem("fsdp_config.fsdp_offload_params", v, "expected true or false");
      else if (b) place("fsdp_config.fsdp_offload_params", v, "zero", "offload_param", YAML::Node("cpu"), yaml_text(v));
    }
    if (YAML::Node v = at("fsdp_backward_prefetch"); given(v)) {
      const std::string p = upper(yaml_text(v));
      if (p == "NO_PREFETCH") place("fsdp_config.fsdp_backward_prefetch", v, "zero", "stage3_prefetch_bucket_size", YAML::Node(0), p);
      else if (p != "BACKWARD_PRE" && p != "BACKWARD_POST")
        problem("fsdp_config.fsdp_backward_prefetch", v, "expected BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH" +
                                                             did_you_mean(p, {"BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH"}));
    }
    if (YAML::Node v = at("fsdp_cpu_ram_efficient_loading"); given(v))
      bool_setting("fsdp_config.fsdp_cpu_ram_efficient_loading", v, "zero", "zero3_init_flag");
    if (YAML::Node v = at("fsdp_activation_checkpointing"); given(v))
      bool_setting("fsdp_config.fsdp_activation_checkpointing", v, "training", "gradient_checkpointing");
  }

  void sharding(const std::string& written, const YAML::Node& v) {
    static const std::vector<std::string> kByNumber = {"", "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD",
                                                       "HYBRID_SHARD_ZERO2"};
    std::string name = upper(yaml_text(v));
    int64_t n = 0;
    if (ValueTraits<int64_t>::parse(v, n) && n >= 1 && n <= 5) name = kByNumber[static_cast<std::size_t>(n)];
    std::string lower_name = name;
    std::transform(lower_name.begin(), lower_name.end(), lower_name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (std::optional<int> stage = fsdp_sharding_stage(lower_name)) {
      place(written, v, "zero", "stage", YAML::Node(*stage), yaml_text(v) + " (" + name + ")");
    } else if (name.rfind("HYBRID_SHARD", 0) == 0) {
      problem(written, v, "'" + yaml_text(v) + "' (" + name + ": sharding within a node, replication across nodes) has no "
                          "equivalent in hftrain; use FULL_SHARD or SHARD_GRAD_OP");
    } else {
      problem(written, v, "'" + yaml_text(v) + "' is not an FSDP sharding strategy" + did_you_mean(name, kByNumber) +
                              " (FULL_SHARD = 1, SHARD_GRAD_OP = 2, NO_SHARD = 3)");
    }
  }

  YAML::Node& root_;
  Issues& issues_;
  Issues& file_;
  std::map<std::string, std::string>& origins_;
  std::vector<std::string>& notes_;
  AccelerateLaunch& out_;
  std::string type_;  // distributed_type, once valid
};

}  // namespace

void apply_accelerate_config(YAML::Node& root, Issues& issues, std::map<std::string, std::string>& origins,
                             std::vector<std::string>& notes, AccelerateLaunch& out) {
  if (YAML::Node t = lookup(lookup(root, "training"), "accelerate_config"); t.IsDefined()) {
    issues.add("training.accelerate_config", t, "the Accelerate config file is distributed.accelerate_config (or "
                                                "--accelerate-config); training.accelerator_config is HF's AcceleratorConfig");
    root["training"].remove("accelerate_config");
  }
  YAML::Node distributed = lookup(root, "distributed");
  const YAML::Node setting = lookup(distributed, "accelerate_config");
  if (!setting.IsDefined()) return;
  auto done = [&] { distributed.remove("accelerate_config"); };
  if (setting.IsNull()) return done();
  if (!setting.IsScalar() || setting.Scalar().empty()) {
    issues.add(kAccelerateConfigKey, setting, "expected the path of an Accelerate config file (YAML, as accelerate config writes it)");
    return done();
  }
  fs::path path = setting.Scalar();
  if (path.is_relative() && !fs::exists(path)) {  // as given (the current directory), else beside the spec
    const fs::path beside = fs::path(issues.file()).parent_path() / path;
    if (fs::exists(beside)) path = beside;
  }
  if (!fs::is_regular_file(path)) {
    issues.add(kAccelerateConfigKey, setting, "cannot read Accelerate config '" + setting.Scalar() + "': no such file");
    return done();
  }
  out.source = path.string();
  YAML::Node config;
  try {
    config = YAML::Load(read_text_file(out.source));
  } catch (const YAML::ParserException& e) {
    issues.add_at(out.source + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1), "",
                  "not valid YAML: " + e.msg);
    return done();
  }
  Issues file_issues(out.source);
  report_duplicate_keys(config, "", file_issues);
  AccelerateReader(root, issues, file_issues, origins, notes, out).read(config);
  issues.absorb(file_issues);
  done();
}

}  // namespace hftrain
