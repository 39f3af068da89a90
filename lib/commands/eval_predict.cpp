// `hftrain eval` and `hftrain predict`: one preparation (spec, weights, where results go, process setup,
// model and the data the command reads), then the evaluation or prediction loop.
#include <algorithm>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>

#include "builtins/register_builtins.h"
#include "checkpoint/model_io.h"
#include "commands/commands.h"
#include "commands/process_setup.h"
#include "data/prompts.h"
#include "distributed/device_probe.h"
#include "log/logger.h"
#include "log/memory_tracker.h"
#include "log/run_summary.h"
#include "train/evaluation.h"
#include "train/prediction.h"
#include "util/error.h"

namespace hftrain {
namespace fs = std::filesystem;
namespace {

// The weights eval / predict run, how the log names them, and where the results go.
struct InferenceWeights {
  std::string trained_file;  // the run's model.safetensors; "" = the pipeline loads model.from_pretrained
  std::string description;
  std::string results_note;  // why the results go where they go
};

bool same_directory(const std::string& a, const std::string& b) {
  std::error_code ec;
  return fs::equivalent(a, b, ec);
}

// Where results go. An explicit training.output_dir (--set) is honoured for everything written. Otherwise
// the run directory (a spec's output_dir): with --model naming another model than that run's, while the
// directory holds a run (run_spec.yaml or model.safetensors), a subdirectory results-<model name> of it, so
// the run's own eval_results.json / all_results.json / predictions.jsonl keep describing the run's model.
std::string results_dir(const std::string& run_dir, const std::string& model_dir, bool explicit_output_dir,
                        std::string& note) {
  if (explicit_output_dir) {
    note = "training.output_dir";
    return run_dir;
  }
  const bool holds_run = fs::exists(fs::path(run_dir) / kSavedSpecName) || fs::exists(fs::path(run_dir) / "model.safetensors") ||
                         fs::exists(fs::path(run_dir) / kAdapterWeightsFile);
  if (model_dir.empty() || !holds_run || same_directory(model_dir, run_dir)) {
    note = "the run directory";
    return run_dir;
  }
  std::string name = fs::path(model_dir).lexically_normal().filename().string();
  if (name.empty() || name == "." || name == "..") name = fs::weakly_canonical(model_dir).filename().string();
  note = "--model " + model_dir + " is not the run's own model; set training.output_dir to choose";
  return (fs::path(run_dir) / ("results-" + name)).string();
}

// Resolves `target` (a spec file or a run directory) into a spec and the weights to use, in this order:
// `model_dir` (--model: a model directory, as model.from_pretrained; for an adapter run the base the run's
// trained adapter goes onto, as PeftModel.from_pretrained(base, run)); the trained model of the run
// directory / output_dir; the spec's model.from_pretrained (a pretrained model never trained here).
// Neither a trained nor a pretrained model is a ConfigError, raised before anything is written.
// spec.training.output_dir becomes the directory results go to (results_dir).
RunSpec load_for_inference(const std::string& target, std::vector<std::string> overrides, const std::string& model_dir,
                           InferenceWeights& weights) {
  const Components& c = builtin_components();
  std::string spec_path = target;
  const bool run_target = fs::is_directory(target);
  if (run_target) {
    spec_path = (fs::path(target) / kSavedSpecName).string();
    if (!fs::exists(spec_path))
      throw ConfigError("'" + target + "' is not a run directory: it has no " + kSavedSpecName);
  }
  const bool explicit_output_dir = std::any_of(overrides.begin(), overrides.end(), [](const std::string& o) {
    return o.rfind("training.output_dir=", 0) == 0;
  });
  if (!model_dir.empty()) {
    if (!fs::is_directory(model_dir)) throw UsageError("--model: '" + model_dir + "' is not a directory");
    overrides.push_back("model.from_pretrained=" + yaml_quoted(model_dir));
  }
  RunSpec spec = load_run_spec(spec_path, overrides, c.catalog());
  // A run directory's weights are its own; a spec's run is its output_dir.
  const std::string run_dir = run_target ? target : spec.training.output_dir;
  const std::string trained = (fs::path(run_dir) / "model.safetensors").string();
  const std::string adapter = (fs::path(run_dir) / kAdapterWeightsFile).string();
  const bool adapter_run = spec.peft || !spec.model.peft_adapter.empty();
  if (adapter_run && fs::exists(adapter)) {  // an adapter run: its base (or --model's), then its trained adapter
    weights.trained_file = adapter;
    weights.description = "the trained adapter " + adapter + " on " +
                          (!model_dir.empty()                   ? "--model " + model_dir
                           : spec.model.from_pretrained.empty() ? std::string("the base initialised from training.seed")
                                                                : "model.from_pretrained " + spec.model.from_pretrained);
  } else if (!model_dir.empty() && spec.peft) {  // PeftModel.from_pretrained(base, run) needs the run's adapter
    throw ConfigError("--model " + model_dir + ": the run's spec has a peft section, so its trained adapter goes onto this "
                      "base, but '" + run_dir + "' holds no " + kAdapterWeightsFile +
                      " (run `hftrain train` first, or evaluate the base with a spec without the peft section)");
  } else if (!model_dir.empty()) {
    weights.description = "--model " + model_dir +
                          (adapter_run ? " with the adapter of model.peft_adapter " + spec.model.peft_adapter : std::string());
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
  const std::string given_output = explicit_output_dir ? spec.training.output_dir : run_dir;
  spec.training.output_dir = results_dir(given_output, model_dir, explicit_output_dir, weights.results_note);
  return spec;
}

// What eval and predict have prepared before their loop.
struct Prepared {
  RunSpec spec;
  ModelAndData pipeline;
  std::unique_ptr<MemoryTracker> memory;
};

// The one preparation of eval and predict: spec and weights, logging, determinism, threads, device, the
// model with its weights and the data the command reads (`use`), precision. Memory stage "init" measured.
Prepared prepare_inference(const std::string& target, const std::vector<std::string>& overrides,
                           const std::string& model_dir, const DataUse& use,
                           const std::function<void(const RunSpec&)>& check_spec = nullptr) {
  InferenceWeights weights;
  Prepared p;
  p.spec = load_for_inference(target, overrides, model_dir, weights);
  if (check_spec) check_spec(p.spec);
  const RunSpec& spec = p.spec;
  configure_logging(spec.training);
  apply_determinism(spec.training);
  setup_threads(spec.distributed);
  const DeviceChoice device = select_device(spec, DistEnv{});
  report_rank_devices(device);
  p.memory = std::make_unique<MemoryTracker>(!spec.training.skip_memory_metrics);
  if (device.on_gpu()) p.memory->set_gpu(cuda_memory_counters(device.cuda_index));
  p.memory->start("init");
  p.pipeline = build_model_and_data(spec, builtin_components(), /*for_training=*/false, use, torch_device_of(device));
  fit_threads_to_step(spec.distributed, 1, p.pipeline, spec.training.per_device_eval_batch_size, 2);
  if (!weights.trained_file.empty()) load_model_weights(weights.trained_file, *p.pipeline.model);
  log_info("model weights: " + weights.description);
  log_info("results go to " + spec.training.output_dir + " (" + weights.results_note + ")");
  apply_inference_precision(p.pipeline);
  place_on_device(p.pipeline, spec, torch_device_of(device));
  p.memory->stop("init");
  return p;
}

}  // namespace

int run_eval(const std::string& target, const std::vector<std::string>& overrides, const std::string& metric_key_prefix,
             const std::string& model_dir, bool generation_flags) {
  if (metric_key_prefix.empty() || metric_key_prefix.find_first_of("/\\ ") != std::string::npos)
    throw UsageError("--metric-key-prefix: '" + metric_key_prefix + "' must be a non-empty name without '/', '\\' or spaces");
  Prepared p = prepare_inference(target, overrides, model_dir, DataUse{false, true, false}, [&](const RunSpec& spec) {
    if (generation_flags && !spec.training.predict_with_generate)
      throw UsageError("eval: the generation flags (--num-beams, --max-length, ...) apply when evaluation generates; "
                       "add --set training.predict_with_generate=true");
  });
  const TrainingArgs& t = p.spec.training;
  log_info(format_inference_summary("Evaluation", split_size(p.pipeline, "eval"), t.per_device_eval_batch_size,
                                    describe_compute()));
  p.memory->start("eval");
  nlohmann::json metrics = evaluate(p.pipeline, builtin_components(), "eval", t.per_device_eval_batch_size,
                                    metric_key_prefix, LoopProgress::mode_for(t.disable_tqdm));
  p.memory->stop_and_update_metrics("eval", metrics);
  print_metrics(metric_key_prefix, metrics);
  std::cout << metrics.dump(2) << std::endl;  // for scripts: the same metrics as JSON
  ensure_output_dir(t.output_dir);
  save_metrics(t.output_dir, metric_key_prefix, metrics);
  return 0;
}

int run_predict(const std::string& target, const std::vector<std::string>& overrides, const std::string& model_dir,
                const std::string& prompts_file, const std::string& prompt_column) {
  std::vector<Prompt> prompts;
  if (!prompts_file.empty()) prompts = read_prompts(prompts_file, prompt_column);  // a bad file fails first
  Prepared p = prepare_inference(target, overrides, model_dir, DataUse{false, false, prompts.empty()});
  const TrainingArgs& t = p.spec.training;
  PredictRequest request;
  request.batch_size = t.per_device_eval_batch_size;
  request.progress = LoopProgress::mode_for(t.disable_tqdm);
  if (!prompts.empty()) {
    const auto& limit = p.spec.data_limits.max_predict_samples;
    if (limit && static_cast<int64_t>(prompts.size()) > *limit) prompts.resize(static_cast<std::size_t>(*limit));
    request.prompts = prepare_prompts(p.pipeline, prompts);
  }
  const int64_t count = prompts.empty() ? split_size(p.pipeline, "test") : static_cast<int64_t>(prompts.size());
  log_info(format_inference_summary(prompts.empty() ? "Prediction" : "Prediction (--prompts " + prompts_file + ")", count,
                                    t.per_device_eval_batch_size, describe_compute()));
  ensure_output_dir(t.output_dir);
  request.path = t.output_dir + "/predictions.jsonl";
  p.memory->start("test");  // HF names the predict stage "test"
  nlohmann::json metrics = predict(p.pipeline, builtin_components(), request);
  p.memory->stop_and_update_metrics("test", metrics);
  std::cout << "predictions written to " << request.path << std::endl;
  print_metrics("predict", metrics);
  std::cout << metrics.dump(2) << std::endl;  // for scripts: the same metrics as JSON
  save_metrics(t.output_dir, "test", metrics);
  return 0;
}

}  // namespace hftrain
