// Implementation of the train / eval / predict / zero-to-fp32 / components commands.
#include "commands/commands.h"

#include <filesystem>
#include <iostream>

#include "checkpoint/model_io.h"
#include "log/logger.h"
#include "log/memory_tracker.h"
#include "log/metrics_format.h"
#include "log/run_summary.h"
#include "train/evaluation.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/threads.h"

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

void setup_threads(const DistributedArgs& d) {
  ThreadPlan plan = configure_threads(static_cast<int>(d.intra_op_threads), 1);
  log_debug("threads: " + std::to_string(plan.intra_op_threads) + " intra-op (BLAS: " + plan.blas + ")");
}

// HF log_metrics: the "***** split metrics *****" table on stdout, world process zero only.
void print_metrics(const std::string& split, const nlohmann::json& metrics) {
  if (is_world_process_zero()) std::cout << metrics_table(split, metrics) << std::flush;
}

// Size of a split for the run-start block (0 when absent; evaluate() then explains).
int64_t split_size(const Pipeline& p, const std::string& split) {
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

// Resolves `target` (a spec file or a run directory) into a spec whose model weights exist.
RunSpec load_for_inference(const std::string& target, const std::vector<std::string>& overrides,
                           std::string& model_path) {
  const Components& c = builtin_components();
  std::string spec_path = target;
  if (fs::is_directory(target)) {
    spec_path = (fs::path(target) / kSavedSpecName).string();
    if (!fs::exists(spec_path))
      throw ConfigError("'" + target + "' is not a run directory: it has no " + kSavedSpecName);
  }
  RunSpec spec = load_run_spec(spec_path, overrides, c.catalog());
  const std::string run_dir = fs::is_directory(target) ? target : spec.training.output_dir;
  model_path = (fs::path(run_dir) / "model.safetensors").string();
  if (!fs::exists(model_path))
    throw RuntimeFailure("no trained model at '" + model_path + "' (run `hftrain train` first)");
  spec.training.output_dir = run_dir;
  return spec;
}

}  // namespace

int run_train(const TrainRequest& request) {
  const Components& c = builtin_components();
  std::vector<std::string> overrides = request.overrides;
  if (!request.resume.empty()) overrides.push_back("training.resume_from_checkpoint=" + request.resume);
  RunSpec spec = load_run_spec(request.spec_path, overrides, c.catalog());
  const std::string resolved = dump_run_spec(spec, c.catalog());
  if (request.dump_config) {
    std::cout << resolved;
    return 0;
  }
  configure_logging(spec.training);
  const std::string& out = spec.training.output_dir;
  if (!directory_is_empty(out) && !spec.training.overwrite_output_dir && spec.training.resume_from_checkpoint.empty())
    throw ConfigError("training.output_dir: '" + out +
                      "' already exists and is not empty; set training.overwrite_output_dir=true or resume");
  setup_threads(spec.distributed);
  MemoryTracker memory(!spec.training.skip_memory_metrics);
  memory.start("init");
  Pipeline pipeline = build_pipeline(spec, c);  // fails on bad data before anything is written

  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw RuntimeFailure("cannot create output_dir '" + out + "': " + ec.message());
  write_file_atomic(out + "/" + kSavedSpecName, resolved);

  Trainer trainer(spec, c, pipeline);
  memory.stop("init");
  trainer.set_memory_tracker(&memory);
  nlohmann::json train_metrics;
  try {
    train_metrics = trainer.train();
  } catch (const StoppedBySignal& stop) {
    throw StoppedBySignal(std::string(stop.what()) + "\nresume with:\n  " + resume_command(request, stop.checkpoint_dir()),
                          stop.signal(), stop.checkpoint_dir());
  }
  save_model_dir(out, *pipeline.model);
  write_file_atomic(out + "/trainer_state.json", trainer.state().to_json_text());
  save_metrics(out, "train", train_metrics);
  print_metrics("train", train_metrics);

  if (auto eval_split = pipeline.data->split("eval"); eval_split && eval_split->size() > 0) {
    memory.start("eval");
    nlohmann::json eval_metrics = evaluate(pipeline, c, "eval", spec.training.per_device_eval_batch_size, "eval");
    memory.stop_and_update_metrics("eval", eval_metrics);
    eval_metrics["epoch"] = trainer.state().epoch;
    print_metrics("eval", eval_metrics);
    save_metrics(out, "eval", eval_metrics);
  }
  std::cout << "model saved to " << out << "/model.safetensors" << std::endl;
  return 0;
}

int run_eval(const std::string& target, const std::vector<std::string>& overrides) {
  std::string model_path;
  RunSpec spec = load_for_inference(target, overrides, model_path);
  configure_logging(spec.training);
  setup_threads(spec.distributed);
  const Components& c = builtin_components();
  MemoryTracker memory(!spec.training.skip_memory_metrics);
  memory.start("init");
  Pipeline pipeline = build_pipeline(spec, c);
  load_model_weights(model_path, *pipeline.model);
  memory.stop("init");
  log_info(format_inference_summary("Evaluation", split_size(pipeline, "eval"), spec.training.per_device_eval_batch_size,
                                    describe_compute()));
  memory.start("eval");
  nlohmann::json metrics = evaluate(pipeline, c, "eval", spec.training.per_device_eval_batch_size, "eval");
  memory.stop_and_update_metrics("eval", metrics);
  print_metrics("eval", metrics);
  std::cout << metrics.dump(2) << std::endl;  // for scripts: the same metrics as JSON
  save_metrics(spec.training.output_dir, "eval", metrics);
  return 0;
}

int run_predict(const std::string& target, const std::vector<std::string>& overrides) {
  std::string model_path;
  RunSpec spec = load_for_inference(target, overrides, model_path);
  configure_logging(spec.training);
  setup_threads(spec.distributed);
  const Components& c = builtin_components();
  MemoryTracker memory(!spec.training.skip_memory_metrics);
  memory.start("init");
  Pipeline pipeline = build_pipeline(spec, c);
  load_model_weights(model_path, *pipeline.model);
  memory.stop("init");
  log_info(format_inference_summary("Prediction", split_size(pipeline, "test"), spec.training.per_device_eval_batch_size,
                                    describe_compute()));
  const std::string out_path = spec.training.output_dir + "/predictions.jsonl";
  memory.start("test");  // HF names the predict stage "test"
  nlohmann::json metrics = predict(pipeline, c, "test", spec.training.per_device_eval_batch_size,
                                   spec.generation.max_new_tokens, out_path);
  memory.stop_and_update_metrics("test", metrics);
  std::cout << "predictions written to " << out_path << std::endl;
  if (!metrics.empty()) {
    print_metrics("predict", metrics);
    std::cout << metrics.dump(2) << std::endl;  // for scripts: the same metrics as JSON
    save_metrics(spec.training.output_dir, "test", metrics);
  }
  return 0;
}

int run_zero_to_fp32(const std::string& checkpoint_dir, const std::string&) {
  throw RuntimeFailure("zero-to-fp32: nothing to convert in '" + checkpoint_dir +
                       "': this version trains without ZeRO sharding, so its checkpoints already hold the full fp32 "
                       "weights in model.safetensors");
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
  return 0;
}

}  // namespace hftrain
