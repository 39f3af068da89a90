// `hftrain train`: one process, a launcher of workers (--nproc-per-node), or one worker of a job.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>

#include "builtins/register_builtins.h"
#include "checkpoint/checkpoint_finder.h"
#include "commands/commands.h"
#include "commands/process_setup.h"
#include "distributed/comm.h"
#include "distributed/comm_nccl.h"
#include "distributed/device_probe.h"
#include "distributed/launcher.h"
#include "distributed/rendezvous.h"
#include "engine/factory.h"
#include "log/logger.h"
#include "log/memory_tracker.h"
#include "optim/optimizer_fit.h"
#include "train/evaluation.h"
#include "train/trainer.h"
#include "train/trial_report.h"
#include "util/error.h"
#include "util/fs.h"

namespace hftrain {
namespace fs = std::filesystem;
namespace {

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
  if (!request.accelerate_config.empty()) cmd += " --accelerate-config " + shell_word(request.accelerate_config);
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
  if (spec.accelerate.gpu_ids) o.extra_env["CUDA_VISIBLE_DEVICES"] = *spec.accelerate.gpu_ids;  // as accelerate launch sets it
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
  if (r.exit_code == 2) throw ConfigError(r.message);  // e.g. nodes started with different configurations
  return r.exit_code;
}

// The checks of `hftrain train` that need the file system: a resume_from_checkpoint that cannot be
// resumed from, a data file that does not exist, an unusable NVMe directory -- spec problems, reported with
// the others at their file:line before anything is written.
std::vector<SpecCheck> train_spec_checks(const ComponentCatalog& catalog) {
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
          },
          [catalog](const RunSpec& spec, const SpecProblemReport& report) {
            if (!catalog.data.contains(spec.data.type) || !spec.data.options) return;  // reported by the data section
            // The data section's files (a file source's *_file options, text_file's path); training reads
            // them all (a tokenizer option may also be a name, and its source reports it).
            const YAML::Node options = catalog.data.dump(spec.data.type, spec.data.options);
            for (const char* key : {"train_file", "validation_file", "test_file", "path"}) {
              const YAML::Node value = options[key];
              if (!value.IsDefined() || !value.IsScalar() || value.Scalar().empty()) continue;
              std::error_code ec;
              if (!fs::exists(value.Scalar(), ec))
                report(std::string("data.") + key, "'" + value.Scalar() + "' does not exist (paths are relative to the "
                                                   "working directory, " + fs::current_path(ec).string() + ")");
            }
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

// The launch settings of an Accelerate config (distributed.accelerate_config) fill the launch flags that
// the command line did not give (the command line wins, as with accelerate launch).
TrainRequest with_accelerate_launch(const TrainRequest& request, const AccelerateLaunch& a) {
  TrainRequest r = request;
  if (!r.given.nnodes && a.nnodes) r.nnodes = *a.nnodes;
  if (!r.given.node_rank && a.node_rank) r.node_rank = *a.node_rank;
  if (!r.given.master_addr && a.master_addr) r.master_addr = *a.master_addr;
  if (!r.given.master_port && a.master_port) r.master_port = *a.master_port;
  return r;
}

// --dump-config: the launch settings an Accelerate config gave, and where each came from.
std::string dump_accelerate_launch(const TrainRequest& launch, const AccelerateLaunch& a) {
  if (!a.present()) return "";
  auto origin = [&](const std::string& field, bool flag_given, const std::string& flag) {
    if (flag_given) return "  (" + flag + " on the command line)";
    auto it = a.origins.find(field);
    return it == a.origins.end() ? std::string("  (default)") : "  (" + it->second + ")";
  };
  std::string text = "# launch settings with distributed.accelerate_config (" + a.source + "); command-line flags win:\n";
  text += "#   nnodes: " + std::to_string(launch.nnodes) + origin("nnodes", launch.given.nnodes, "--nnodes") + "\n";
  text += "#   node_rank: " + std::to_string(launch.node_rank) + origin("node_rank", launch.given.node_rank, "--node-rank") + "\n";
  text += "#   master_addr: " + (launch.master_addr.empty() ? std::string("127.0.0.1") : launch.master_addr) +
          origin("master_addr", launch.given.master_addr, "--master-addr") + "\n";
  text += "#   master_port: " + (launch.master_port > 0 ? std::to_string(launch.master_port) : std::string("a free port")) +
          origin("master_port", launch.given.master_port, "--master-port") + "\n";
  text += "#   rdzv_backend: " + a.rdzv_backend + origin("rdzv_backend", false, "") + "\n";
  text += "#   CUDA_VISIBLE_DEVICES: " + (a.gpu_ids ? *a.gpu_ids : std::string("not restricted")) + origin("gpu_ids", false, "") + "\n";
  return text;
}

// The command line's overrides and the ones its flags stand for.
std::vector<std::string> train_overrides(const TrainRequest& request) {
  std::vector<std::string> overrides = request.overrides;
  if (!request.accelerate_config.empty())
    overrides.push_back(std::string(kAccelerateConfigKey) + "=" + request.accelerate_config);
  if (!request.nproc_per_node.empty()) overrides.push_back("distributed.nproc_per_node=" + request.nproc_per_node);
  if (!request.resume.empty()) overrides.push_back("training.resume_from_checkpoint=" + request.resume);
  return overrides;
}

// This process's logging, determinism and threads, and the output_dir check every rank makes before the
// rendezvous (so rank 0 writing into it cannot fail another's check).
void set_up_process(const RunSpec& spec, const DistEnv& env) {
  configure_logging(spec.training, ProcessIdentity{env.rank, env.local_rank, env.world_size});
  for (const auto& note : spec.notes) log_info(note);
  if (!spec.training.run_name.empty()) log_info("run name: " + spec.training.run_name);
  apply_determinism(spec.training);
  const std::string& out = spec.training.output_dir;
  if (!directory_is_empty(out) && !spec.training.overwrite_output_dir && spec.training.resume_from_checkpoint.empty())
    throw ConfigError("training.output_dir: '" + out +
                      "' already exists and is not empty; set training.overwrite_output_dir=true or resume");
  setup_threads(spec.distributed, env.local_world_size);
}

// The device, and with several workers the rendezvous and the world's communicator.
DeviceChoice join_workers(const RunSpec& spec, const DistEnv& env, const std::string& resolved) {
  const DeviceChoice device = select_device(spec, env);
  if (env.world_size > 1) {
    const RendezvousOptions rendezvous_options = rendezvous_options_for(spec.distributed, resolved);
    set_world(device.backend == "nccl" ? make_nccl_comm(env, rendezvous_options, device.cuda_index)
                                       : make_gloo_comm(env, rendezvous_options));
    log_debug("worker " + env.describe());
  }
  report_rank_devices(device);
  return device;
}

// The model and data on the device; fails on bad data before anything is written.
ModelAndData build_training_pipeline(const RunSpec& spec, const Components& c, const DistEnv& env,
                                     const DeviceChoice& device) {
  ModelAndData pipeline = build_model_and_data(spec, c, /*for_training=*/true, {}, torch_device_of(device));
  if (spec.training.eval_strategy != "no" && split_size(pipeline, "eval") == 0)  // as HF's Trainer, before training
    throw ConfigError("training.eval_strategy: '" + spec.training.eval_strategy +
                      "' needs evaluation examples, and the data source has none (give data an evaluation split, or "
                      "set eval_strategy: \"no\")");
  fit_threads_to_step(spec.distributed, env.local_world_size, pipeline, spec.training.per_device_train_batch_size, 6);
  place_on_device(pipeline, spec, torch_device_of(device));
  return pipeline;
}

// Rank 0's callbacks: the output_dir writer, and the report to hftrain search when this run is a trial.
void add_main_rank_callbacks(Trainer& trainer, const RunSpec& spec, const Components& c) {
  trainer.add_callback(
      std::make_unique<OutputDirWriter>(spec.training.output_dir, saved_run_spec(spec, c.catalog()), trainer));
  if (auto report = trial_report_from_environment()) trainer.add_callback(std::move(report));
}

// Trains; a stop by a signal also says the command that resumes.
nlohmann::json train_with_resume_hint(Trainer& trainer, const TrainRequest& request) {
  try {
    return trainer.train();
  } catch (const StoppedBySignal& stop) {
    throw StoppedBySignal(std::string(stop.what()) + "\nresume with:\n  " + resume_command(request, stop.checkpoint_dir()),
                          stop.signal(), stop.checkpoint_dir());
  }
}

nlohmann::json final_evaluation(ModelAndData& pipeline, const Components& c, const RunSpec& spec, MemoryTracker& memory) {
  memory.start("eval");
  nlohmann::json eval_metrics = evaluate(pipeline, c, "eval", spec.training.per_device_eval_batch_size, "eval");
  memory.stop_and_update_metrics("eval", eval_metrics);
  return eval_metrics;
}

// One worker (or the only process): build, train, save, evaluate (do_eval), and on rank 0 write the results.
int train_worker(const TrainRequest& request, const RunSpec& spec, const Components& c, const DistEnv& env,
                 const DeviceChoice& device) {
  const bool main_rank = env.rank == 0;
  const std::string& out = spec.training.output_dir;
  MemoryTracker memory(!spec.training.skip_memory_metrics);
  if (device.on_gpu()) memory.set_gpu(cuda_memory_counters(device.cuda_index));
  memory.start("init");
  ModelAndData pipeline = build_training_pipeline(spec, c, env, device);
  Trainer trainer(spec, c, pipeline);
  if (main_rank) add_main_rank_callbacks(trainer, spec, c);
  memory.stop("init");
  trainer.set_memory_tracker(&memory);
  const nlohmann::json train_metrics = train_with_resume_hint(trainer, request);
  const bool model_saved = trainer.save_final_model(out);  // collective; rank 0 writes
  auto eval_split = pipeline.data->split("eval");
  const bool final_eval = spec.training.do_eval && eval_split && eval_split->size() > 0;
  nlohmann::json eval_metrics;
  if (final_eval && trainer.model_partitioned())  // ZeRO-3: every rank gathers unit by unit
    eval_metrics = final_evaluation(pipeline, c, spec, memory);
  if (env.world_size > 1) {  // all ranks are done; only rank 0 writes the results
    world().barrier("end of training");
    set_world(std::make_unique<LocalComm>());
    if (!main_rank) return 0;
  }
  write_file_atomic(out + "/trainer_state.json", trainer.state().to_json_text());
  save_metrics(out, "train", train_metrics);
  print_metrics("train", train_metrics);
  if (final_eval) {
    if (eval_metrics.is_null()) eval_metrics = final_evaluation(pipeline, c, spec, memory);
    eval_metrics["epoch"] = trainer.state().epoch;
    print_metrics("eval", eval_metrics);
    save_metrics(out, "eval", eval_metrics);
  }
  if (model_saved) std::cout << "model saved to " << out << "/" << weights_file_name(*pipeline.model) << std::endl;
  return 0;
}

}  // namespace

int run_train(const TrainRequest& given_request) {
  const Components& c = builtin_components();
  std::vector<std::string> overrides = train_overrides(given_request);
  RunSpec spec = load_run_spec(given_request.spec_path, overrides, c.catalog(), train_spec_checks(c.catalog()));
  const TrainRequest request = with_accelerate_launch(given_request, spec.accelerate);
  // A launcher (--nproc-per-node > 1, no worker environment) or a worker (torchrun / SLURM / launcher
  // environment), else one process.
  const DistEnv env = detect_dist_env();
  if (!env.is_worker()) resolve_worker_count(spec, overrides);
  if (request.dump_config) {
    std::cout << dump_with_deepspeed(spec, c, spec.distributed.nproc_per_node.count * request.nnodes)
              << dump_accelerate_launch(request, spec.accelerate);
    return 0;
  }
  const std::string resolved = dump_run_spec(spec, c.catalog());
  if (!env.is_worker() && (spec.distributed.nproc_per_node.count > 1 || request.nnodes > 1))
    return launch_training(TrainRequest{request.spec_path, overrides, false, "", "", request.nnodes, request.node_rank,
                                        request.master_addr, request.master_port, request.given, ""},
                           spec);
  // One process: the GPU ids apply to it, as accelerate launch sets them for the process it starts.
  if (!env.is_worker() && spec.accelerate.gpu_ids) ::setenv("CUDA_VISIBLE_DEVICES", spec.accelerate.gpu_ids->c_str(), 1);
  set_up_process(spec, env);
  const DeviceChoice device = join_workers(spec, env, resolved);
  return train_worker(request, spec, c, env, device);
}

}  // namespace hftrain
