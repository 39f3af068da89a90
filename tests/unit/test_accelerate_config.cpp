// distributed.accelerate_config: the Accelerate config files of the HF Trainer docs (MULTI_GPU on two
// machines, FSDP with TRANSFORMER_BASED_WRAP, DEEPSPEED with a ds_config file and inline) and the file
// `accelerate config default` writes load unchanged. The expected values are what accelerate launch sets
// from each file (its documented mapping: torchrun's nproc_per_node = num_processes // num_machines, nnodes
// = num_machines, node_rank = machine_rank, master address / port; ACCELERATE_MIXED_PRECISION,
// ACCELERATE_DEEPSPEED_ZERO_STAGE, ACCELERATE_GRADIENT_CLIPPING, the offload devices; FSDP_SHARDING_STRATEGY
// 1 = FULL_SHARD), written here from the files' text. Unknown keys, refused features and the
// deepspeed_config_file conflicts are ConfigErrors naming file:line and key.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "builtins/register_builtins.h"
#include "util/error.h"
#include "spec_test_helpers.h"
#include "../ds_doc_configs.h"

using namespace hftrain;
using namespace hftrain_test;

namespace {

const std::filesystem::path kDir = std::filesystem::temp_directory_path() / ("hftrain_unit_accelerate_" + std::to_string(::getpid()));

std::string write_file(const std::string& name, const std::string& text) {
  std::filesystem::create_directories(kDir);
  const auto path = (kDir / name).string();
  std::ofstream(path) << text;
  return path;
}

// The 1-based line of the first line of `text` that starts with `key` (after indentation).
int line_of(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.find_first_not_of(' ') != std::string::npos && line.substr(line.find_first_not_of(' ')).rfind(key, 0) == 0) return n;
  }
  return -1;
}

std::string spec_text(const std::string& accelerate_path, const std::string& extra = "") {
  return "model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 32}\n"
         "data: {type: digit_reversal}\n"
         "training: {output_dir: /tmp/hftrain_unit_accelerate_out}\n"
         "distributed: {accelerate_config: " + accelerate_path + "}\n" + extra;
}

RunSpec load_with(const std::string& name, const std::string& accelerate_yaml, const std::string& extra = "",
                  const std::vector<std::string>& overrides = {}) {
  const std::string a = write_file(name, accelerate_yaml);
  return load_run_spec(write_file(name + ".spec.yaml", spec_text(a, extra)), overrides, builtin_components().catalog());
}

std::string error_with(const std::string& name, const std::string& accelerate_yaml, const std::string& extra = "",
                       const std::vector<std::string>& overrides = {}) {
  return config_error([&] { load_with(name, accelerate_yaml, extra, overrides); });
}

// The HF Trainer docs' multi-node MULTI_GPU file (node 0 of 2).
const std::string kMultiGpu = R"(compute_environment: LOCAL_MACHINE
distributed_type: MULTI_GPU
downcast_bf16: 'no'
gpu_ids: all
machine_rank: 0
main_process_ip: 192.168.20.1
main_process_port: 9898
main_training_function: main
mixed_precision: fp16
num_machines: 2
num_processes: 8
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: false
)";

// The HF Trainer docs' FSDP file.
const std::string kFsdp = R"(compute_environment: LOCAL_MACHINE
debug: false
distributed_type: FSDP
downcast_bf16: 'no'
fsdp_config:
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_backward_prefetch_policy: BACKWARD_PRE
  fsdp_forward_prefetch: true
  fsdp_offload_params: false
  fsdp_sharding_strategy: 1
  fsdp_state_dict_type: FULL_STATE_DICT
  fsdp_sync_module_states: true
  fsdp_transformer_layer_cls_to_wrap: BertLayer
  fsdp_use_orig_params: true
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 2
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: false
)";

// The HF Trainer docs' DEEPSPEED file with a ds_config file (path filled in by the test).
std::string deepspeed_with_file(const std::string& json_path) {
  return "compute_environment: LOCAL_MACHINE\n"
         "deepspeed_config:\n"
         "  deepspeed_config_file: " + json_path + "\n"
         "  zero3_init_flag: true\n"
         "distributed_type: DEEPSPEED\n"
         "downcast_bf16: 'no'\n"
         "machine_rank: 0\n"
         "main_training_function: main\n"
         "num_machines: 1\n"
         "num_processes: 4\n"
         "rdzv_backend: static\n"
         "same_network: true\n"
         "tpu_env: []\n"
         "tpu_use_cluster: false\n"
         "tpu_use_sudo: false\n"
         "use_cpu: false\n";
}

// The HF Trainer docs' DEEPSPEED file with the settings inline.
const std::string kDeepSpeedInline = R"(compute_environment: LOCAL_MACHINE
deepspeed_config:
  gradient_accumulation_steps: 1
  gradient_clipping: 0.7
  offload_optimizer_device: cpu
  offload_param_device: cpu
  zero3_init_flag: true
  zero_stage: 2
distributed_type: DEEPSPEED
downcast_bf16: 'no'
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 4
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: false
)";

// What `accelerate config default` writes.
const std::string kDefault = R"(compute_environment: LOCAL_MACHINE
debug: false
distributed_type: 'NO'
downcast_bf16: 'no'
enable_cpu_affinity: false
machine_rank: 0
main_training_function: main
mixed_precision: 'no'
num_machines: 1
num_processes: 1
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: false
)";

// Every documented ClusterConfig key, at the values `accelerate config` writes when a feature is not used.
const std::string kEveryKey = R"(compute_environment: LOCAL_MACHINE
distributed_type: MULTI_CPU
mixed_precision: 'no'
use_cpu: true
debug: false
num_processes: 2
machine_rank: 0
num_machines: 1
gpu_ids: null
main_process_ip: null
main_process_port: null
rdzv_backend: static
same_network: true
main_training_function: main
enable_cpu_affinity: false
fp8_config: {}
deepspeed_config: {}
fsdp_config: {}
parallelism_config: {}
tp_config: {}
megatron_lm_config: {}
ipex_config: {}
mpirun_config: {}
downcast_bf16: 'no'
tpu_name: null
tpu_zone: null
tpu_use_cluster: false
tpu_use_sudo: false
command_file: null
commands: null
tpu_vm: null
tpu_env: []
dynamo_config: {}
)";

}  // namespace

TEST_CASE("accelerate: the docs' two-machine MULTI_GPU file sets torchrun's layout and fp16", "[unit][accelerate]") {
  // fp16 maps onto precision.fp16, which this CPU build refuses, located at the file's line.
  CHECK_THAT(error_with("multi_gpu_fp16.yaml", kMultiGpu),
             Catch::Contains("multi_gpu_fp16.yaml:" + std::to_string(line_of(kMultiGpu, "mixed_precision")) +
                             ":18 (as accelerate mixed_precision): precision.fp16"));
  std::string bf16 = kMultiGpu;
  bf16.replace(bf16.find("mixed_precision: fp16"), 21, "mixed_precision: bf16");
  RunSpec spec = load_with("multi_gpu.yaml", bf16);
  CHECK(spec.distributed.nproc_per_node.count == 4);  // num_processes 8 // num_machines 2
  REQUIRE(spec.accelerate.present());
  CHECK(spec.accelerate.nnodes == 2);
  CHECK(spec.accelerate.node_rank == 0);
  CHECK(spec.accelerate.master_addr == std::string("192.168.20.1"));
  CHECK(spec.accelerate.master_port == 9898);
  CHECK(spec.accelerate.rdzv_backend == "static");
  CHECK_FALSE(spec.accelerate.gpu_ids.has_value());  // all: CUDA_VISIBLE_DEVICES untouched
  CHECK(spec.precision.bf16);
  CHECK_FALSE(spec.precision.fp16);
  CHECK_FALSE(spec.training.use_cpu);
  const std::string where = "multi_gpu.yaml:" + std::to_string(line_of(kMultiGpu, "num_processes")) + ":";
  CHECK_THAT(spec.origins.at("distributed.nproc_per_node"), Catch::Contains("accelerate num_processes") && Catch::Contains(where));
  CHECK_THAT(spec.accelerate.origins.at("nnodes"), Catch::Contains("num_machines: 2") &&
                                                       Catch::Contains("multi_gpu.yaml:" + std::to_string(line_of(kMultiGpu, "num_machines"))));
  CHECK(has_note(spec, "main_training_function: main accepted with no effect"));
  CHECK(has_note(spec, "same_network: true accepted with no effect"));
}

TEST_CASE("accelerate: the docs' FSDP file is ZeRO stage 3 (FULL_SHARD) in bf16", "[unit][accelerate]") {
  RunSpec spec = load_with("fsdp.yaml", kFsdp);
  CHECK(spec.zero.stage == 3);  // fsdp_sharding_strategy 1 = FULL_SHARD
  CHECK(spec.zero.offload_param == "none");
  CHECK(spec.precision.bf16);
  CHECK(spec.distributed.nproc_per_node.count == 2);
  CHECK_THAT(spec.origins.at("zero.stage"), Catch::Contains("accelerate fsdp_config.fsdp_sharding_strategy: 1 (FULL_SHARD)"));
  CHECK(has_note(spec, "fsdp_config.fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP accepted"));
  CHECK(has_note(spec, "fsdp_backward_prefetch_policy: the older name of fsdp_backward_prefetch"));
  // The other strategies and FSDP2's reshard flag.
  auto stage_of = [](const std::string& name, const std::string& line) {
    std::string text = kFsdp;
    const std::size_t at = text.find("  fsdp_sharding_strategy: 1\n");
    text.replace(at, std::string("  fsdp_sharding_strategy: 1\n").size(), line);
    return load_with(name, text).zero.stage;
  };
  CHECK(stage_of("fsdp2.yaml", "  fsdp_sharding_strategy: SHARD_GRAD_OP\n") == 2);
  CHECK(stage_of("fsdp3.yaml", "  fsdp_sharding_strategy: 3\n") == 0);
  CHECK(stage_of("fsdp4.yaml", "  fsdp_reshard_after_forward: false\n") == 2);
  CHECK(stage_of("fsdp5.yaml", "") == 3);  // absent: FULL_SHARD, the plugin's default
}

TEST_CASE("accelerate: the docs' DEEPSPEED file with a ds_config file reads that file", "[unit][accelerate]") {
  const std::string json = write_file("ds_zero3.json", hftrain_test::kZero3);
  RunSpec spec = load_with("ds_file.yaml", deepspeed_with_file(json));
  REQUIRE(spec.deepspeed.present());
  CHECK(spec.deepspeed.source == json);
  CHECK(spec.zero.stage == 3);  // from the JSON
  CHECK(spec.zero.zero3_init_flag);
  CHECK(spec.distributed.nproc_per_node.count == 4);
  CHECK_THAT(spec.origins.at("zero.stage"), Catch::Contains("ds_zero3.json"));
}

TEST_CASE("accelerate: the docs' inline DEEPSPEED file: stage 2, CPU optimizer offload, clipping 0.7, bf16", "[unit][accelerate]") {
  RunSpec spec = load_with("ds_inline.yaml", kDeepSpeedInline);
  CHECK(spec.zero.stage == 2);
  CHECK(spec.zero.offload_optimizer.device == "cpu");
  CHECK(spec.zero.offload_param == "none");  // DeepSpeed offloads parameters only at stage 3
  CHECK(has_note(spec, "offload_param_device: cpu at ZeRO stage 2: no effect"));
  CHECK(spec.training.max_grad_norm == Approx(0.7));
  CHECK(spec.training.gradient_accumulation_steps == 1);
  CHECK(spec.precision.bf16);
  CHECK(spec.zero.zero3_init_flag);
  CHECK_THAT(spec.origins.at("training.max_grad_norm"),
             Catch::Contains("accelerate deepspeed_config.gradient_clipping: 0.7") &&
                 Catch::Contains("ds_inline.yaml:" + std::to_string(line_of(kDeepSpeedInline, "gradient_clipping"))));
  // zero_stage absent: DeepSpeedPlugin's default 2.
  std::string no_stage = kDeepSpeedInline;
  no_stage.erase(no_stage.find("  zero_stage: 2\n"), std::string("  zero_stage: 2\n").size());
  CHECK(load_with("ds_nostage.yaml", no_stage).zero.stage == 2);
}

TEST_CASE("accelerate: accelerate config default's file and every documented key load", "[unit][accelerate]") {
  RunSpec d = load_with("default.yaml", kDefault);
  CHECK(d.distributed.nproc_per_node.count == 1);
  CHECK_FALSE(d.precision.bf16);
  CHECK_FALSE(d.precision.fp16);
  RunSpec all = load_with("every_key.yaml", kEveryKey);
  CHECK(all.training.use_cpu);
  CHECK(all.distributed.nproc_per_node.count == 2);
  std::string ipex = kEveryKey;
  ipex.replace(ipex.find("ipex_config: {}"), 15, "ipex_config: {ipex: true}");
  CHECK(has_note(load_with("ipex.yaml", ipex), "Intel Extension for PyTorch"));
}

TEST_CASE("accelerate: an unknown key is an error with did-you-mean at file:line", "[unit][accelerate]") {
  std::string text = kMultiGpu + "num_proceses: 2\n";
  const std::string e = error_with("typo.yaml", text);
  CHECK_THAT(e, Catch::Contains("typo.yaml:" + std::to_string(line_of(text, "num_proceses")) + ":1: num_proceses: unknown key") &&
                    Catch::Contains("did you mean 'num_processes'?"));
  std::string nested = kDeepSpeedInline;
  nested.replace(nested.find("  zero_stage: 2"), 15, "  zero_stag: 2\n");
  CHECK_THAT(error_with("typo2.yaml", nested), Catch::Contains("deepspeed_config.zero_stag: unknown key") &&
                                                   Catch::Contains("did you mean 'zero_stage'?"));
}

TEST_CASE("accelerate: deepspeed_config_file excludes the settings the JSON holds, as accelerate does", "[unit][accelerate]") {
  const std::string json = write_file("ds_zero3b.json", hftrain_test::kZero3);
  std::string text = deepspeed_with_file(json);
  text.insert(text.find("  zero3_init_flag"), "  zero_stage: 3\n  gradient_clipping: 1.0\n");
  text += "mixed_precision: fp16\n";
  const std::string e = error_with("ds_clash.yaml", text);
  for (const std::string key : {"zero_stage", "gradient_clipping", "mixed_precision"})
    CHECK_THAT(e, Catch::Contains("ds_clash.yaml:" + std::to_string(line_of(text, key)) + ":") &&
                      Catch::Contains(key + ": ") && Catch::Contains("deepspeed_config_file"));
}

TEST_CASE("accelerate: features hftrain lacks are refused with a reason", "[unit][accelerate]") {
  auto with = [](const std::string& from, const std::string& to) {
    std::string t = kMultiGpu;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  CHECK_THAT(error_with("r1.yaml", kMultiGpu + "megatron_lm_config:\n  megatron_lm_tp_degree: 2\n"),
             Catch::Contains("megatron_lm_config: ") && Catch::Contains("Megatron-LM"));
  CHECK_THAT(error_with("r2.yaml", with("mixed_precision: fp16", "mixed_precision: fp8")), Catch::Contains("FP8 training is not available"));
  CHECK_THAT(error_with("r3.yaml", with("MULTI_GPU", "MEGATRON_LM")), Catch::Contains("distributed_type: 'MEGATRON_LM'"));
  CHECK_THAT(error_with("r4.yaml", with("LOCAL_MACHINE", "AMAZON_SAGEMAKER")), Catch::Contains("SageMaker"));
  CHECK_THAT(error_with("r5.yaml", with("rdzv_backend: static", "rdzv_backend: etcd")), Catch::Contains("etcd rendezvous is not available"));
  CHECK_THAT(error_with("r6.yaml", with("num_processes: 8", "num_processes: -1")), Catch::Contains("num_processes: -1"));
  CHECK_THAT(error_with("r7.yaml", with("num_processes: 8", "num_processes: 7")), Catch::Contains("not a multiple of num_machines 2"));
  std::string one_gpu = with("gpu_ids: all", "gpu_ids: '0'");
  one_gpu.replace(one_gpu.find("num_machines: 2"), 15, "num_machines: 1");
  CHECK_THAT(error_with("r9.yaml", one_gpu), Catch::Contains("gpu_ids: '0': multi-GPU training on one machine needs at least two ids"));
  std::string hybrid = kFsdp;
  hybrid.replace(hybrid.find("fsdp_sharding_strategy: 1"), 25, "fsdp_sharding_strategy: 4");
  CHECK_THAT(error_with("r10.yaml", hybrid), Catch::Contains("HYBRID_SHARD") && Catch::Contains("no equivalent"));
  CHECK_THAT(error_with("r11.yaml", with("distributed_type: MULTI_GPU\n", "")), Catch::Contains("distributed_type: required key is missing"));
  CHECK_THAT(error_with("r12.yaml", kMultiGpu + "tp_config:\n  tp_size: 2\n"),
             Catch::Contains("tp_config: ") && Catch::Contains("tensor parallelism"));
}

TEST_CASE("accelerate: values that disagree with the spec are conflicts and the command line wins", "[unit][accelerate]") {
  CHECK_THAT(error_with("c1.yaml", kMultiGpu, "precision: {bf16: true}\n"),
             Catch::Contains("accelerate mixed_precision: 'fp16' disagrees with precision.bf16"));
  RunSpec spec = load_with("c2.yaml", kMultiGpu, "", {"distributed.nproc_per_node=3", "precision.fp16=false"});
  CHECK(spec.distributed.nproc_per_node.count == 3);
  CHECK_FALSE(spec.precision.fp16);
  CHECK_THAT(error_with("c3.yaml", kMultiGpu, "", {"training.accelerate_config=a.yaml"}),
             Catch::Contains("distributed.accelerate_config"));
}

TEST_CASE("accelerate: --dump-config names the Accelerate file as the origin", "[unit][accelerate]") {
  RunSpec spec = load_with("dump.yaml", kDeepSpeedInline);
  const std::string text = dump_run_spec(spec, builtin_components().catalog(), /*with_origins=*/true);
  CHECK_THAT(text, Catch::Contains("accelerate deepspeed_config.zero_stage: 2 (") && Catch::Contains("dump.yaml:"));
  CHECK_THAT(text, Catch::Contains("accelerate num_processes: 4 / num_machines 1"));
}
