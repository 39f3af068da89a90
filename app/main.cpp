// hftrain command line: parses arguments with CLI11, dispatches to lib/commands, and maps errors to
// exit codes (0 ok, 1 runtime failure, 2 usage or config error, 130 / 143 stopped by SIGINT / SIGTERM
// after saving a checkpoint).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <exception>
#include <iostream>
#include <new>

#include <c10/util/Exception.h>

#include "commands/checkpoint_convert.h"
#include "commands/checkpoint_inspect.h"
#include "commands/commands.h"
#include "commands/estimate.h"
#include "commands/merge_adapter.h"
#include "commands/zero_to_fp32.h"
#include "hf_command_line.h"
#include "commands/report.h"
#include "log/logger.h"
#include "runspec/sections.h"
#include "util/error.h"
#include "util/malloc_policy.h"
#include "util/threads.h"
#include "util/version.h"

namespace {

// --nproc-per-node: a positive integer, or `auto` (one worker per visible GPU, 1 on the CPU) where the
// command runs on this machine. Where it does not (`checkpoint convert` writes a layout for a later run),
// `auto` is refused by name.
CLI::Validator worker_count(bool auto_allowed, const std::string& why_not_auto = "") {
  return CLI::Validator(
      [auto_allowed, why_not_auto](std::string& value) -> std::string {
        if (value == "auto") return auto_allowed ? "" : "auto is not accepted here: " + why_not_auto;
        std::size_t used = 0;
        long long n = 0;
        try {
          n = std::stoll(value, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != value.size() || n < 1)
          return "'" + value + "' is not a positive number of workers" + (auto_allowed ? " or auto" : "");
        return "";
      },
      auto_allowed ? "INT>0|auto" : "INT>0");
}

const char* const kOutOfMemoryHint =
    "hint: this worker's memory (or its limit) does not hold the run's state: shard more of it (zero.stage 3, "
    "more workers), offload the optimizer state (zero.offload_optimizer nvme), or lower the batch size; "
    "`hftrain estimate` sizes each option";

// "error: <what>"; a failed allocation (LibTorch's CPU allocator, or one inside a collective) is named
// as running out of memory, with what to do about it.
void report_error(const std::string& what) {
  if (what.find("can't allocate memory") != std::string::npos)
    std::cerr << "error: out of memory: " << what << "\n" << kOutOfMemoryHint << std::endl;
  else
    std::cerr << "error: " << what << std::endl;
}

// The `generation` options as flags of one subcommand; given flags become --set generation.<name>=<value>.
class GenerationFlags {
 public:
  explicit GenerationFlags(CLI::App& command) {
    const auto infos = hftrain::schema_of<hftrain::GenerationArgs>().describe();
    values_.reserve(infos.size());  // the options hold references into it
    for (const auto& info : infos) {
      std::string flag = info.name;
      std::replace(flag.begin(), flag.end(), '_', '-');
      values_.emplace_back(info.name, "");
      options_.push_back(command.add_option("--" + flag, values_.back().second, info.help + " (generation." + info.name + ")")
                             ->type_name(info.type));
    }
  }
  bool any_given() const {
    for (const auto* o : options_)
      if (o->count() > 0) return true;
    return false;
  }
  void append_overrides(std::vector<std::string>& overrides) const {
    for (std::size_t i = 0; i < options_.size(); ++i)
      if (options_[i]->count() > 0) overrides.push_back("generation." + values_[i].first + "=" + values_[i].second);
  }

 private:
  std::vector<std::pair<std::string, std::string>> values_;  // option name, value as given
  std::vector<CLI::Option*> options_;
};

}  // namespace

int main(int argc, char** argv) {
  hftrain::reexec_with_short_openmp_spin(argv);  // see util/threads.h
  CLI::App app{"hftrain: HF Trainer + DeepSpeed ZeRO style training from a YAML/JSON run spec"};
  app.set_version_flag("--version", hftrain::version_text());
  app.require_subcommand(1);

  hftrain::TrainRequest train;
  auto* train_cmd = app.add_subcommand("train", "Train a model as the run spec says")
                        ->footer("Example:\n  hftrain train configs/quickstart.yaml --set training.learning_rate=3e-4");
  train_cmd->add_option("spec", train.spec_path, "Run spec (YAML or JSON)")->required();
  train_cmd->add_option("--set", train.overrides, "Override a spec value: dotted.key=value (repeatable)");
  train_cmd->add_flag("--dump-config", train.dump_config, "Print the fully resolved spec and exit");
  auto* resume_opt = train_cmd->add_option("--resume", train.resume,
                                           "Resume from a checkpoint directory; bare --resume = the newest complete "
                                           "checkpoint in output_dir")
                         ->expected(0, 1);

  std::string eval_target;
  std::vector<std::string> eval_overrides;
  std::string eval_model;
  auto* eval_cmd = app.add_subcommand("eval", "Evaluate a trained or pretrained model on the eval split")
                       ->footer("Examples:\n  hftrain eval runs/quickstart\n  hftrain eval spec.yaml --model models/gpt2\n"
                               "  hftrain eval runs/t5 --num-beams 4 --max-length 64   (with training.predict_with_generate)");
  eval_cmd->add_option("target", eval_target, "Run directory or run spec")->required();
  eval_cmd->add_option("--model", eval_model,
                       "Model directory to evaluate (as model.from_pretrained) instead of the run's trained model");
  eval_cmd->add_option("--set", eval_overrides, "Override a spec value: dotted.key=value (repeatable)");
  std::string eval_prefix = "eval";
  eval_cmd->add_option("--metric-key-prefix", eval_prefix,
                       "Name metrics <prefix>_loss, ... and save them as <prefix>_results.json (HF metric_key_prefix)")
      ->capture_default_str();

  std::string predict_target;
  std::vector<std::string> predict_overrides;
  std::string predict_model;
  std::string predict_prompts, predict_prompt_column = "text";
  auto* predict_cmd = app.add_subcommand("predict", "Write predictions.jsonl for the test split or for a file of prompts")
                          ->footer("Examples:\n  hftrain predict runs/quickstart --set generation.max_new_tokens=6\n"
                                  "  hftrain predict runs/gpt2 --prompts prompts.txt --set generation.max_new_tokens=50\n"
                                  "  hftrain predict runs/x --num-beams 4 --num-return-sequences 2 --length-penalty 0.6");
  predict_cmd->add_option("target", predict_target, "Run directory or run spec")->required();
  predict_cmd->add_option("--model", predict_model,
                          "Model directory to predict with (as model.from_pretrained) instead of the run's trained model");
  predict_cmd->add_option("--set", predict_overrides, "Override a spec value: dotted.key=value (repeatable)");
  predict_cmd->add_option("--prompts", predict_prompts,
                          "Causal LMs: continue each prompt of this file instead of the test split: one per line "
                          "(.txt and other names) or one per row (.jsonl / .csv / .tsv, field --prompt-column); "
                          "no data file is read");
  predict_cmd->add_option("--prompt-column", predict_prompt_column, "--prompts jsonl / csv / tsv: the field holding the prompt")
      ->capture_default_str();
  // Every `generation` option is also a flag of eval and predict (--num-beams 4 = --set generation.num_beams=4,
  // as HF's evaluate(num_beams=...) / predict(max_length=...)), taken from the section's one declaration, so the
  // spec validates it as any other value.
  GenerationFlags eval_generation(*eval_cmd), predict_generation(*predict_cmd);

  train_cmd->add_option("--nproc-per-node", train.nproc_per_node,
                        "Worker processes on this node (data parallel), or auto = one per visible GPU (1 on the CPU); "
                        "overrides distributed.nproc_per_node")
      ->check(worker_count(true));
  train_cmd->add_option("--nnodes", train.nnodes, "Nodes in the job (each runs this command)")->check(CLI::PositiveNumber);
  train_cmd->add_option("--node-rank", train.node_rank, "This node's index, 0 .. nnodes-1")->check(CLI::NonNegativeNumber);
  train_cmd->add_option("--master-addr", train.master_addr, "Address of node 0 (rendezvous); default 127.0.0.1");
  train_cmd->add_option("--master-port", train.master_port, "Rendezvous port on node 0; default a free port (one node)")
      ->check(CLI::Range(1, 65535));
  train_cmd->add_option("--accelerate-config", train.accelerate_config,
                        "An Accelerate config file (accelerate launch --config_file): its settings join the spec's "
                        "(distributed.accelerate_config); these flags win over its launch settings");
  auto* nnodes_opt = train_cmd->get_option("--nnodes");
  auto* node_rank_opt = train_cmd->get_option("--node-rank");
  auto* master_addr_opt = train_cmd->get_option("--master-addr");
  auto* master_port_opt = train_cmd->get_option("--master-port");

  hftrain::ZeroToFp32Request z;
  auto* z_cmd = app.add_subcommand("zero-to-fp32", "Rebuild full fp32 weights from ZeRO checkpoint shards")
                    ->footer("Example:\n  hftrain zero-to-fp32 runs/x/checkpoint-100 runs/x/fp32 --max-shard-size 2GB");
  z_cmd->add_option("checkpoint_dir", z.checkpoint_dir, "Checkpoint directory (holding `latest`) or its global_stepN/")
      ->required();
  z_cmd->add_option("output", z.output, "Output directory (default: fp32-<checkpoint name> beside the checkpoint)");
  z_cmd->add_option("--max-shard-size", z.max_shard_size,
                    "Split model.safetensors into model-0000x-of-0000y.safetensors above this size (5GB, 500MB, 2GiB)");

  hftrain::MergeAdapterRequest merge;
  auto* merge_cmd =
      app.add_subcommand("merge-adapter", "Merge a PEFT LoRA / DoRA adapter into its base model and save a plain HF model "
                                          "directory (PEFT merge_and_unload)")
          ->footer("Example:\n  hftrain merge-adapter models/llama runs/lora models/llama-merged");
  merge_cmd->add_option("base_dir", merge.base_dir, "The base model's HF directory (config.json + safetensors)")->required();
  merge_cmd->add_option("adapter_dir", merge.adapter_dir, "The adapter directory (adapter_config.json + "
                                                          "adapter_model.safetensors), e.g. a run's output_dir or checkpoint")
      ->required();
  merge_cmd->add_option("out_dir", merge.out_dir, "Directory that receives the merged model")->required();

  hftrain::EstimateRequest estimate;
  auto* estimate_cmd =
      app.add_subcommand("estimate", "Per-rank memory of a run for every ZeRO stage, precision and offload, before launch")
          ->footer("Example:\n  hftrain estimate configs/quickstart.yaml --nproc-per-node 8 --memory-per-rank 24GiB");
  estimate_cmd->add_option("spec", estimate.spec_path, "Run spec (YAML or JSON)")->required();
  estimate_cmd->add_option("--set", estimate.overrides, "Override a spec value: dotted.key=value (repeatable)");
  estimate_cmd->add_option("--nproc-per-node", estimate.nproc_per_node,
                           "Workers per node, or auto = one per visible GPU (1 on the CPU); default distributed.nproc_per_node")
      ->check(worker_count(true));
  estimate_cmd->add_option("--nnodes", estimate.nnodes, "Nodes in the job")->check(CLI::PositiveNumber);
  estimate_cmd->add_option("--memory-per-rank", estimate.memory_per_rank,
                           "Memory one worker may use (24GiB, 16GB, ...); default this machine's available memory / "
                           "local workers");
  estimate_cmd->add_flag("--json", estimate.json, "Print the estimate as JSON");

  std::string inspect_dir;
  auto* checkpoint_cmd = app.add_subcommand("checkpoint", "Work with checkpoints")->require_subcommand(1);
  auto* inspect_cmd =
      checkpoint_cmd
          ->add_subcommand("inspect", "Print a checkpoint's step, layout, precision, files and the manifest check "
                                      "(exit 1 when it is not complete)")
          ->footer("Example:\n  hftrain checkpoint inspect runs/x/checkpoint-500");
  inspect_cmd->add_option("checkpoint_dir", inspect_dir, "Checkpoint directory (checkpoint-N)")->required();
  hftrain::ConvertRequest convert;
  auto* convert_cmd =
      checkpoint_cmd
          ->add_subcommand("convert", "Re-partition a checkpoint's fp32 master weights and optimizer state for another "
                                      "number of workers and ZeRO stage (0-2), as resume does when it loads")
          ->footer("Example:\n  hftrain checkpoint convert runs/x/checkpoint-500 --nproc-per-node 6 --stage 2 runs/x6");
  convert_cmd->add_option("checkpoint_dir", convert.checkpoint_dir, "Checkpoint directory (checkpoint-N)")->required();
  convert_cmd->add_option("out_dir", convert.out_dir, "Directory that receives checkpoint-N (an output_dir)")->required();
  convert_cmd->add_option("--nproc-per-node", convert.nproc_per_node, "Workers of the new layout")
      ->required()
      ->check(worker_count(false, "the new layout is for the run that resumes it, which may see other GPUs than "
                                  "this machine; give the number of workers"));
  convert_cmd->add_option("--stage", convert.stage, "ZeRO stage of the new layout (0, 1 or 2)")->required();

  auto* components_cmd = app.add_subcommand("components", "List every registered component and its options")
                             ->footer("Example:\n  hftrain components");

  hftrain::ReportRequest report;
  auto* report_cmd =
      app.add_subcommand("report", "Write an HTML page plotting loss, eval metrics and learning rate of runs")
          ->footer("Example:\n  hftrain report runs/a runs/b -o compare.html");
  report_cmd->add_option("run_dirs", report.run_dirs, "Run (or checkpoint) directories holding trainer_state.json")
      ->required();
  report_cmd->add_option("-o,--output", report.output,
                         "Output HTML file (default: RUN_DIR/report.html for one run, ./report.html for several)");

  hftrain::SearchRequest search;
  auto* search_cmd =
      app.add_subcommand("search", "Hyperparameter search with Optuna over the spec's search section; each trial is an "
                                   "hftrain train run in output_dir/trial-<n>/")
          ->footer("Example:\n  hftrain search configs/quickstart_search.yaml --n-trials 12\n"
                   "  hftrain search spec.yaml --n-trials 20 --storage sqlite:///study.db --study-name lr   (on each machine)");
  search_cmd->add_option("spec", search.spec_path, "Run spec (YAML or JSON) with a search section")->required();
  search_cmd->add_option("--set", search.overrides, "Override a spec value for every trial: dotted.key=value (repeatable)");
  search_cmd->add_option("--n-trials", search.n_trials, "Trials this process runs (as Optuna's optimize(n_trials))")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  search_cmd->add_option("--storage", search.storage,
                         "Optuna storage URL shared by cooperating processes (sqlite:///study.db, postgresql://...); "
                         "default sqlite:///<output_dir>/study.db");
  search_cmd->add_option("--study-name", search.study_name, "The study's name in the storage (created or continued)")
      ->default_str("hftrain-search");
  search_cmd->add_option("--direction", search.direction, "Whether the objective is minimized or maximized")
      ->capture_default_str()
      ->check(CLI::IsMember({"minimize", "maximize"}));
  search_cmd->add_option("--metric", search.metric,
                         "The evaluation metric to optimize (eval_loss, eval_accuracy, ...); default HF's objective: "
                         "eval_loss when it is the only metric, else the sum of the other metrics");

  hftrain::init_logging();
  std::vector<std::string> words;  // HF-style flags and torch.distributed.launch's --local_rank, as hftrain's
  try {
    words = hftrain::adapt_hf_command_line(app, argc, argv);
  } catch (const hftrain::Error& e) {
    report_error(e.what());
    return e.exit_code();
  }
  std::vector<char*> word_ptrs{argv[0]};
  for (auto& w : words) word_ptrs.push_back(w.data());
  try {
    app.parse(static_cast<int>(word_ptrs.size()), word_ptrs.data());
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  if (resume_opt->count() > 0 && train.resume.empty()) train.resume = "last";
  train.given = {nnodes_opt->count() > 0, node_rank_opt->count() > 0, master_addr_opt->count() > 0,
                 master_port_opt->count() > 0};
  eval_generation.append_overrides(eval_overrides);
  predict_generation.append_overrides(predict_overrides);
  // Training keeps freed memory for the next step; the other commands give large blocks back as soon as
  // they are freed (util/malloc_policy.h): evaluation and prediction meet batches of every length, whose
  // logits would otherwise fragment a heap that never shrinks, so their peak would grow with the data.
  if (*train_cmd)
    hftrain::keep_freed_memory_for_reuse();
  else
    hftrain::return_freed_memory_promptly();

  try {
    if (*train_cmd) return hftrain::run_train(train);
    if (*eval_cmd) return hftrain::run_eval(eval_target, eval_overrides, eval_prefix, eval_model, eval_generation.any_given());
    if (*predict_cmd)
      return hftrain::run_predict(predict_target, predict_overrides, predict_model, predict_prompts, predict_prompt_column);
    if (*z_cmd) return hftrain::run_zero_to_fp32(z);
    if (*merge_cmd) return hftrain::run_merge_adapter(merge);
    if (*components_cmd) return hftrain::run_components();
    if (*estimate_cmd) return hftrain::run_estimate(estimate);
    if (*inspect_cmd) return hftrain::run_checkpoint_inspect(inspect_dir);
    if (*convert_cmd) return hftrain::run_checkpoint_convert(convert);
    if (*report_cmd) return hftrain::run_report(report);
    if (*search_cmd) return hftrain::run_search(search);
  } catch (const hftrain::StoppedBySignal& e) {
    // Every worker of a job stops at the same step; rank 0 prints the checkpoint and the resume command.
    if (hftrain::is_world_process_zero()) std::cerr << e.what() << std::endl;
    return hftrain::finish_after_error(e.exit_code());
  } catch (const hftrain::Error& e) {
    report_error(e.what());
    return hftrain::finish_after_error(e.exit_code());
  } catch (const c10::Error& e) {
    report_error(std::string("LibTorch: ") + e.what_without_backtrace());
    return hftrain::finish_after_error(1);
  } catch (const std::bad_alloc&) {
    report_error("can't allocate memory (std::bad_alloc)");
    return hftrain::finish_after_error(1);
  } catch (const std::exception& e) {
    report_error(e.what());
    return hftrain::finish_after_error(1);
  }
  return 2;
}
