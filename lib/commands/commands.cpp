// Implementation of the train / eval / predict / zero-to-fp32 / components commands.
#include <unistd.h>
#include "commands/commands.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <ATen/Context.h>

#include "builtins/register_builtins.h"
#include "checkpoint/checkpoint_finder.h"
#include "checkpoint/model_io.h"
#include "distributed/comm.h"
#include "distributed/device_probe.h"
#include "distributed/devices.h"
#include "distributed/env.h"
#include "distributed/launcher.h"
#include "engine/factory.h"
#include "log/logger.h"
#include "log/memory_tracker.h"
#include "log/metrics_format.h"
#include "log/run_summary.h"
#include "log/speed_metrics.h"
#include "models/parameter_counts.h"
#include "optim/optimizer_fit.h"
#include "runspec/hf_names.h"
#include "train/evaluation.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/threads.h"
#include "util/torch_compat.h"

namespace hftrain {
namespace fs = std::filesystem;
namespace {

const char* kSavedSpecName = "run_spec.yaml";

// HF save_metrics: <split>_results.json (indent 4, sorted keys) and merged into all_results.json.
void save_metrics(const std::string& output_dir, const std::string& split, const nlohmann::json& metrics) {
  write_file_atomic(output_dir + "/" + split + "_results.json", metrics.dump(4) + "\n");
  const std::string all_path = output_dir + "/all_results.json";
  nlohmann::json all = nlohmann::json::object();
  if (fs::exists(all_path)) {
    try {
      all = nlohmann::json::parse(read_text_file(all_path));
    } catch (const nlohmann::json::exception&) {
      all = nlohmann::json::object();
    }
  }
  all.update(metrics);
  write_file_atomic(all_path, all.dump(4) + "\n");
}

// HF enable_full_determinism: torch's deterministic algorithms (seeding is done where each RNG is made).
void apply_determinism(const TrainingArgs& t) {
  if (t.full_determinism) at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
}

void setup_threads(const DistributedArgs& d, int local_workers = 1) {
  ThreadPlan plan = configure_threads(static_cast<int>(d.intra_op_threads), local_workers);
  log_debug("threads: " + std::to_string(plan.intra_op_threads) + " intra-op (BLAS: " + plan.blas + ")");
}

// Once the model and data are known: the work of one micro-batch, `flops_per_param_token` (6 training,
// 2 forward only) x parameters x examples x tokens per example (1 for feature rows), for the small-step
// thread rule (util/threads.h). Tied weights count once; the LM head's matmul is counted with them.
void fit_threads_to_step(const DistributedArgs& d, int local_workers, const ModelAndData& p, int64_t batch_size,
                         double flops_per_param_token) {
  if (d.intra_op_threads > 0) return;  // the user's count, set at start, stands
  const double tokens = static_cast<double>(batch_size) * static_cast<double>(std::max<int64_t>(1, p.data->shape().max_length));
  const double step_flops = flops_per_param_token * static_cast<double>(count_parameters(*p.model).total) * tokens;
  const ThreadPlan plan = choose_threads(0, local_workers, step_flops);
  if (plan.reason.empty()) return;  // not a small step: the count set at start stands
  apply_thread_plan(plan);
  log_info("threads: 1 intra-op thread: " + plan.reason + " (distributed.intra_op_threads overrides)");
}

// HF log_metrics: the "***** split metrics *****" table on stdout, world process zero only.
void print_metrics(const std::string& split, const nlohmann::json& metrics) {
  if (is_world_process_zero()) std::cout << metrics_table(split, metrics) << std::flush;
}

// Size of a split for the run-start block (0 when absent; evaluate() then explains).
int64_t split_size(const ModelAndData& p, const std::string& split) {
  auto d = p.data->split(split);
  return d ? d->size() : 0;
}

// A word for a shell command line: quoted only when needed.
std::string shell_word(const std::string& w) {
  const bool plain = !w.empty() && w.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                         "0123456789_./=:,+-@%") == std::string::npos;
  if (plain) return w;
  std::string q = "'";
  for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The command that resumes an interrupted `hftrain train` from `checkpoint_dir`.
std::string resume_command(const TrainRequest& request, const std::string& checkpoint_dir) {
  std::string cmd = "hftrain train " + shell_word(request.spec_path);
  for (const auto& o : request.overrides)
    if (o.rfind("training.resume_from_checkpoint=", 0) != 0) cmd += " --set " + shell_word(o);
  return cmd + " --resume " + shell_word(checkpoint_dir);
}

// `hftrain train --nproc-per-node N`: the spec is valid (checked before anything is spawned); start N
// workers running the same command with the torchrun environment (dist/launcher.h). A restart resumes
// from the newest complete checkpoint of output_dir, or starts over when there is none.
int launch_training(const TrainRequest& request, const RunSpec& spec) {
  const auto& optimizers = builtin_components().optimizers;
  check_optimizer_fits(spec, optimizers.traits(spec.optimizer.type),
                       optimizers.names_where([](const OptimizerTraits& t) { return t.element_wise; }));
  const std::string& out = spec.training.output_dir;
  // Node 0 hosts rank 0, the only writer; another node may start after rank 0 has begun writing.
  if (request.node_rank == 0 && !directory_is_empty(out) && !spec.training.overwrite_output_dir &&
      spec.training.resume_from_checkpoint.empty())
    throw ConfigError("training.output_dir: '" + out +
                      "' already exists and is not empty; set training.overwrite_output_dir=true or resume");
  LaunchOptions o;
  o.nproc_per_node = static_cast<int>(spec.distributed.nproc_per_node.count);
  o.nnodes = request.nnodes;
  o.node_rank = request.node_rank;
  o.master_addr = request.master_addr;
  o.master_port = request.master_port;
  o.max_restarts = static_cast<int>(spec.distributed.max_restarts);
  const std::string exe = self_executable();
  o.worker_argv = [&](int restart) {
    std::vector<std::string> argv = {exe, "train", request.spec_path};
    for (const auto& ov : request.overrides) argv.insert(argv.end(), {"--set", ov});  // incl. --nproc-per-node's
    std::string resume = request.resume;
    if (restart > 0) {
      resume = find_last_complete_checkpoint(out, [](const std::string& m) { log_warning(m); });
      if (resume.empty()) argv.insert(argv.end(), {"--set", "training.overwrite_output_dir=true"});
      log_warning("launcher: restart " + std::to_string(restart) + (resume.empty() ? " starts over (no complete checkpoint)" : " resumes from " + resume));
    }
    if (!resume.empty()) argv.insert(argv.end(), {"--resume", resume});
    return argv;
  };
  LaunchResult r = launch_workers(o);
  if (r.exit_code == 1) throw RuntimeFailure(r.message);
  return r.exit_code;
}

// A path as a YAML double-quoted scalar, for a --set value that must stay a string.
std::string yaml_quoted(const std::string& text) {
  std::string q = "\"";
  for (char c : text) q += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return q + "\"";
}

// The weights eval / predict run, and how the log names them.
struct InferenceWeights {
  std::string trained_file;  // the run's model.safetensors; "" = the pipeline loads model.from_pretrained
  std::string description;
};

// Resolves `target` (a spec file or a run directory) into a spec and the weights to use, in this order:
// `model_dir` (--model: a model directory, as model.from_pretrained); the trained model of the run
// directory / output_dir; the spec's model.from_pretrained (a pretrained model never trained here).
// Neither a trained nor a pretrained model is a ConfigError, raised before anything is written.
RunSpec load_for_inference(const std::string& target, std::vector<std::string> overrides, const std::string& model_dir,
                           InferenceWeights& weights) {
  const Components& c = builtin_components();
  std::string spec_path = target;
  if (fs::is_directory(target)) {
    spec_path = (fs::path(target) / kSavedSpecName).string();
    if (!fs::exists(spec_path))
      throw ConfigError("'" + target + "' is not a run directory: it has no " + kSavedSpecName);
  }
  if (!model_dir.empty()) {
    if (!fs::is_directory(model_dir)) throw UsageError("--model: '" + model_dir + "' is not a directory");
    overrides.push_back("model.from_pretrained=" + yaml_quoted(model_dir));
  }
  RunSpec spec = load_run_spec(spec_path, overrides, c.catalog());
  const std::string run_dir = fs::is_directory(target) ? target : spec.training.output_dir;
  const std::string trained = (fs::path(run_dir) / "model.safetensors").string();
  spec.training.output_dir = run_dir;
  if (!model_dir.empty()) {
    weights.description = "--model " + model_dir;
  } else if (fs::exists(trained)) {
    weights.trained_file = trained;
    weights.description = "the trained model " + trained;
    spec.model.from_pretrained.clear();  // the trained weights replace them; the options are already resolved
  } else if (!spec.model.from_pretrained.empty()) {
    weights.description = "model.from_pretrained " + spec.model.from_pretrained + " (no trained model in '" + run_dir + "')";
  } else {
    throw ConfigError("no trained model at '" + trained +
                      "' and the spec names no model.from_pretrained (run `hftrain train` first, or give --model DIR)");
  }
  return spec;
}

// eval / predict write into output_dir, which a pretrained model's spec may not have created yet.
void ensure_output_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw RuntimeFailure("cannot create output_dir '" + dir + "': " + ec.message());
}

// The checks of `hftrain train` that need the file system: a resume_from_checkpoint that cannot be
// resumed from is a spec problem, reported with the others before anything is written.
std::vector<SpecCheck> train_spec_checks() {
  return {[](const RunSpec& spec, const SpecProblemReport& report) {
    const std::string problem = resume_setting_problem(spec.training.resume_from_checkpoint, spec.training.output_dir);
    if (!problem.empty()) report("training.resume_from_checkpoint", problem);
  },
          [](const RunSpec& spec, const SpecProblemReport& report) {
            const OffloadOptimizerArgs& o = spec.zero.offload_optimizer;
            if (o.device != "nvme" || o.nvme_path.empty()) return;
            if (!fs::is_directory(o.nvme_path))
              report("zero.offload_optimizer.nvme_path", "'" + o.nvme_path + "' is not an existing directory");
            else if (::access(o.nvme_path.c_str(), W_OK | X_OK) != 0)
              report("zero.offload_optimizer.nvme_path", "'" + o.nvme_path + "' is not writable");
          }};
}

// Creates output_dir and saves the resolved spec once the trainer is set up (optimizer, schedule,
// engine and resume checkpoint all accepted), so a problem found there leaves output_dir untouched.
// Runs before the reporters open their files (on_train_begin).
// With training.deepspeed it also writes ds_config.resolved.json (every "auto" filled, as the run uses it).
class OutputDirWriter : public TrainerCallback {
 public:
  OutputDirWriter(std::string dir, std::string resolved_spec, const Trainer& trainer)
      : dir_(std::move(dir)), resolved_spec_(std::move(resolved_spec)), trainer_(trainer) {}
  std::string name() const override { return "OutputDirWriter"; }
  void on_init_end(const TrainerState&, TrainerControl&) override {
    ensure_output_dir(dir_);
    write_file_atomic(dir_ + "/" + kSavedSpecName, resolved_spec_);
    if (!trainer_.resolved_deepspeed_config().empty())
      write_file_atomic(dir_ + "/ds_config.resolved.json", trainer_.resolved_deepspeed_config());
  }

 private:
  std::string dir_;
  std::string resolved_spec_;
  const Trainer& trainer_;
};

// --dump-config: the resolved spec and, with training.deepspeed, that config with "auto" filled (the
// scheduler's step counts stay "auto" until the data is loaded at train start) as comment lines.
std::string dump_with_deepspeed(const RunSpec& spec, const Components& c, int64_t world_size) {
  std::string text = dump_run_spec(spec, c.catalog(), /*with_origins=*/true);
  if (!spec.deepspeed.present()) return text;
  text += "# training.deepspeed (" + spec.deepspeed.source + ") as HF resolves it; total_num_steps and "
          "warmup_num_steps are filled at train start:\n";
  const std::string json = resolve_deepspeed_config(spec, world_size, -1, -1);
  std::size_t pos = 0;
  while (pos < json.size()) {
    const std::size_t end = json.find('\n', pos);
    text += "#   " + json.substr(pos, end - pos) + "\n";
    pos = end == std::string::npos ? json.size() : end + 1;
  }
  return text;
}

// distributed.nproc_per_node auto, in a process that is not a worker: the number of workers this node
// starts (dist/devices.h), logged with the reason, and written into the spec and into `overrides` (which
// the workers receive), so every process and the saved run_spec.yaml see the number.
void resolve_worker_count(RunSpec& spec, std::vector<std::string>& overrides) {
  WorkerCount& n = spec.distributed.nproc_per_node;
  if (!n.automatic) return;
  const WorkerCountChoice choice = choose_worker_count(kCudaBuild, spec.training.use_cpu, process_env, NvmlGpuInventory());
  log_info("distributed.nproc_per_node auto: " + choice.reason);
  n = WorkerCount{choice.count, false};
  overrides.push_back("distributed.nproc_per_node=" + std::to_string(choice.count));
}

// The one gate to lift once the engines, the models' placement and an NCCL Comm handle GPU tensors: until
// then a worker that would compute on a GPU refuses (ConfigError) rather than silently using the CPU.
constexpr bool kGpuTrainingBuilt = false;

// This process's device (dist/devices.h), made current and recorded for the run-start block. Every rank
// takes part in the exchange of device names (one small all-gather), so rank 0's block names each rank's.
DeviceChoice select_device(const RunSpec& spec, const DistEnv& env) {
  const TorchDeviceProbe probe;
  const DeviceChoice choice =
      choose_device(kCudaBuild, spec.training.use_cpu, spec.distributed.backend, env.local_rank, probe.gpu_count());
  const std::string mine = describe_device(choice, probe);
  if (choice.on_gpu() && !kGpuTrainingBuilt)
    throw ConfigError("this worker would run on " + mine + " (LOCAL_RANK " + std::to_string(env.local_rank) +
                      ", backend " + choice.backend + "), but hftrain's engines, model placement and collectives "
                      "run on the CPU only so far (docs/gpu.md); set training.use_cpu: true to run on the CPU");
  if (choice.on_gpu()) set_current_gpu(choice.cuda_index);
  log_debug("device: " + mine + (choice.reason.empty() ? "" : " (" + choice.reason + ")") + ", collectives over " +
            choice.backend);
  std::vector<std::string> all{mine};
  if (world().world_size() > 1) {
    constexpr std::size_t kMaxChars = 160;
    std::vector<int64_t> packed(kMaxChars + 1, 0);
    packed[0] = static_cast<int64_t>(std::min(mine.size(), kMaxChars));
    for (std::size_t i = 0; i < static_cast<std::size_t>(packed[0]); ++i)
      packed[i + 1] = static_cast<unsigned char>(mine[i]);
    all.clear();
    for (const auto& row : world().all_gather_ints(packed, "device names")) {
      std::string text;
      for (int64_t i = 0; i < row[0]; ++i) text += static_cast<char>(row[static_cast<std::size_t>(i + 1)]);
      all.push_back(text);
    }
  }
  set_compute_device(describe_rank_devices(all));
  return choice;
}

}  // namespace

int run_train(const TrainRequest& request) {
  const Components& c = builtin_components();
  std::vector<std::string> overrides = request.overrides;
  if (!request.nproc_per_node.empty()) overrides.push_back("distributed.nproc_per_node=" + request.nproc_per_node);
  if (!request.resume.empty()) overrides.push_back("training.resume_from_checkpoint=" + request.resume);
  RunSpec spec = load_run_spec(request.spec_path, overrides, c.catalog(), train_spec_checks());
  // A launcher (--nproc-per-node > 1, no worker environment) or a worker (torchrun / SLURM / launcher
  // environment), else one process.
  const DistEnv env = detect_dist_env();
  if (!env.is_worker()) resolve_worker_count(spec, overrides);
  if (request.dump_config) {
    std::cout << dump_with_deepspeed(spec, c, spec.distributed.nproc_per_node.count * request.nnodes);
    return 0;
  }
  const std::string resolved = dump_run_spec(spec, c.catalog());
  if (!env.is_worker() && (spec.distributed.nproc_per_node.count > 1 || request.nnodes > 1))
    return launch_training(TrainRequest{request.spec_path, overrides, false, "", "", request.nnodes, request.node_rank,
                                        request.master_addr, request.master_port},
                           spec);
  configure_logging(spec.training, ProcessIdentity{env.rank, env.local_rank, env.world_size});
  for (const auto& note : spec.notes) log_info(note);
  if (!spec.training.run_name.empty()) log_info("run name: " + spec.training.run_name);
  apply_determinism(spec.training);
  const std::string& out = spec.training.output_dir;
  if (!directory_is_empty(out) && !spec.training.overwrite_output_dir && spec.training.resume_from_checkpoint.empty())
    throw ConfigError("training.output_dir: '" + out +
                      "' already exists and is not empty; set training.overwrite_output_dir=true or resume");
  setup_threads(spec.distributed, env.local_world_size);
  // Every rank has checked output_dir before the rendezvous, so rank 0 writing into it cannot fail another's check.
  if (env.world_size > 1) {
    set_world(make_gloo_comm(env, std::chrono::seconds(spec.distributed.ddp_timeout)));
    log_debug("worker " + env.describe());
  }
  const DeviceChoice device = select_device(spec, env);
  const bool main_rank = env.rank == 0;
  MemoryTracker memory(!spec.training.skip_memory_metrics);
  if (device.on_gpu()) memory.set_gpu(cuda_memory_counters(device.cuda_index));
  memory.start("init");
  ModelAndData pipeline = build_model_and_data(spec, c, /*for_training=*/true);  // fails on bad data before anything is written
  if (spec.training.eval_strategy != "no" && split_size(pipeline, "eval") == 0)  // as HF's Trainer, before training
    throw ConfigError("training.eval_strategy: '" + spec.training.eval_strategy +
                      "' needs evaluation examples, and the data source has none (give data an evaluation split, or "
                      "set eval_strategy: \"no\")");
  fit_threads_to_step(spec.distributed, env.local_world_size, pipeline, spec.training.per_device_train_batch_size, 6);

  Trainer trainer(spec, c, pipeline);
  if (main_rank) trainer.add_callback(std::make_unique<OutputDirWriter>(out, resolved, trainer));
  memory.stop("init");
  trainer.set_memory_tracker(&memory);
  nlohmann::json train_metrics;
  try {
    train_metrics = trainer.train();
  } catch (const StoppedBySignal& stop) {
    throw StoppedBySignal(std::string(stop.what()) + "\nresume with:\n  " + resume_command(request, stop.checkpoint_dir()),
                          stop.signal(), stop.checkpoint_dir());
  }
  const bool model_saved = trainer.save_final_model(out);  // collective; rank 0 writes
  auto eval_split = pipeline.data->split("eval");
  const bool final_eval = spec.training.do_eval && eval_split && eval_split->size() > 0;
  nlohmann::json eval_metrics;
  auto run_final_eval = [&] {
    memory.start("eval");
    eval_metrics = evaluate(pipeline, c, "eval", spec.training.per_device_eval_batch_size, "eval");
    memory.stop_and_update_metrics("eval", eval_metrics);
  };
  if (final_eval && trainer.model_partitioned()) run_final_eval();  // ZeRO-3: every rank gathers unit by unit
  if (env.world_size > 1) {  // all ranks are done; only rank 0 writes the results
    world().barrier("end of training");
    set_world(std::make_unique<LocalComm>());
    if (!main_rank) return 0;
  }
  write_file_atomic(out + "/trainer_state.json", trainer.state().to_json_text());
  save_metrics(out, "train", train_metrics);
  print_metrics("train", train_metrics);

  if (final_eval) {
    if (eval_metrics.is_null()) run_final_eval();
    eval_metrics["epoch"] = trainer.state().epoch;
    print_metrics("eval", eval_metrics);
    save_metrics(out, "eval", eval_metrics);
  }
  if (model_saved) std::cout << "model saved to " << out << "/model.safetensors" << std::endl;
  return 0;
}

int run_eval(const std::string& target, const std::vector<std::string>& overrides, const std::string& metric_key_prefix,
             const std::string& model_dir, bool generation_flags) {
  if (metric_key_prefix.empty() || metric_key_prefix.find_first_of("/\\ ") != std::string::npos)
    throw UsageError("--metric-key-prefix: '" + metric_key_prefix + "' must be a non-empty name without '/', '\\' or spaces");
  InferenceWeights weights;
  RunSpec spec = load_for_inference(target, overrides, model_dir, weights);
  if (generation_flags && !spec.training.predict_with_generate)
    throw UsageError("eval: the generation flags (--num-beams, --max-length, ...) apply when evaluation generates; "
                     "add --set training.predict_with_generate=true");
  configure_logging(spec.training);
  apply_determinism(spec.training);
  setup_threads(spec.distributed);
  const DeviceChoice device = select_device(spec, DistEnv{});
  const Components& c = builtin_components();
  MemoryTracker memory(!spec.training.skip_memory_metrics);
  if (device.on_gpu()) memory.set_gpu(cuda_memory_counters(device.cuda_index));
  memory.start("init");
  ModelAndData pipeline = build_model_and_data(spec, c);
  fit_threads_to_step(spec.distributed, 1, pipeline, spec.training.per_device_eval_batch_size, 2);
  if (!weights.trained_file.empty()) load_model_weights(weights.trained_file, *pipeline.model);
  log_info("model weights: " + weights.description);
  apply_inference_precision(pipeline, spec);
  memory.stop("init");
  log_info(format_inference_summary("Evaluation", split_size(pipeline, "eval"), spec.training.per_device_eval_batch_size,
                                    describe_compute()));
  memory.start("eval");
  nlohmann::json metrics = evaluate(pipeline, c, "eval", spec.training.per_device_eval_batch_size, metric_key_prefix);
  memory.stop_and_update_metrics("eval", metrics);
  print_metrics(metric_key_prefix, metrics);
  std::cout << metrics.dump(2) << std::endl;  // for scripts: the same metrics as JSON
  ensure_output_dir(spec.training.output_dir);
  save_metrics(spec.training.output_dir, metric_key_prefix, metrics);
  return 0;
}

int run_predict(const std::string& target, const std::vector<std::string>& overrides, const std::string& model_dir) {
  InferenceWeights weights;
  RunSpec spec = load_for_inference(target, overrides, model_dir, weights);
  configure_logging(spec.training);
  apply_determinism(spec.training);
  setup_threads(spec.distributed);
  const DeviceChoice device = select_device(spec, DistEnv{});
  const Components& c = builtin_components();
  MemoryTracker memory(!spec.training.skip_memory_metrics);
  if (device.on_gpu()) memory.set_gpu(cuda_memory_counters(device.cuda_index));
  memory.start("init");
  ModelAndData pipeline = build_model_and_data(spec, c);
  fit_threads_to_step(spec.distributed, 1, pipeline, spec.training.per_device_eval_batch_size, 2);
  if (!weights.trained_file.empty()) load_model_weights(weights.trained_file, *pipeline.model);
  log_info("model weights: " + weights.description);
  apply_inference_precision(pipeline, spec);
  memory.stop("init");
  log_info(format_inference_summary("Prediction", split_size(pipeline, "test"), spec.training.per_device_eval_batch_size,
                                    describe_compute()));
  ensure_output_dir(spec.training.output_dir);
  const std::string out_path = spec.training.output_dir + "/predictions.jsonl";
  memory.start("test");  // HF names the predict stage "test"
  nlohmann::json metrics = predict(pipeline, c, "test", spec.training.per_device_eval_batch_size, out_path);
  memory.stop_and_update_metrics("test", metrics);
  std::cout << "predictions written to " << out_path << std::endl;
  if (!metrics.empty()) {
    print_metrics("predict", metrics);
    std::cout << metrics.dump(2) << std::endl;  // for scripts: the same metrics as JSON
    save_metrics(spec.training.output_dir, "test", metrics);
  }
  return 0;
}

int finish_after_error(int exit_code) {
  if (world().world_size() > 1) {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    std::_Exit(exit_code);
  }
  return exit_code;
}

int run_components() {
  const Components& c = builtin_components();
  for (const RegistryBase* r : {static_cast<const RegistryBase*>(&c.models), static_cast<const RegistryBase*>(&c.data),
                                static_cast<const RegistryBase*>(&c.optimizers),
                                static_cast<const RegistryBase*>(&c.schedulers),
                                static_cast<const RegistryBase*>(&c.metrics)}) {
    std::cout << r->kind() << ":\n";
    for (const auto& name : r->names()) {
      std::cout << "  " << name << " - " << r->description(name) << "\n";
      for (const auto& o : r->options(name))
        std::cout << "      " << o.name << " (" << o.type << ", default " << o.default_text << "): " << o.help << "\n";
    }
  }
  std::cout << "HF TrainingArguments names accepted in training:\n";
  for (const auto& o : hf_training_names()) std::cout << "  " << o.name << " (" << o.type << "): " << o.help << "\n";
  return 0;
}

}  // namespace hftrain
