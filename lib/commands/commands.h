// The user-facing commands behind `hftrain <command>`; app/ only parses arguments and maps errors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hftrain {

struct TrainRequest {
  std::string spec_path;
  std::vector<std::string> overrides;
  bool dump_config = false;
  std::string resume;  // --resume [PATH]: "" = not given, "last" when given bare, else a checkpoint directory
  // Data-parallel launch (torchrun's options): "" = distributed.nproc_per_node of the spec; a number or "auto".
  std::string nproc_per_node;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr;  // "" = 127.0.0.1 on one node
  int master_port = 0;      // 0 = a free port on one node
  // Which of the four above were given on the command line (they win over an Accelerate config's).
  struct Given {
    bool nnodes = false, node_rank = false, master_addr = false, master_port = false;
  } given;
  std::string accelerate_config;  // --accelerate-config FILE: distributed.accelerate_config given on the command line
};

int run_train(const TrainRequest& request);
// `target` is a run spec file or a finished run directory (holding run_spec.yaml). The weights: `model_dir`
// (--model: a model directory, read as model.from_pretrained) when given, else the trained model in the
// run directory / output_dir, else the spec's model.from_pretrained (a pretrained model never trained
// here). Results go to training.output_dir when --set gives it; else to the run directory (a spec's
// output_dir), or, with a --model other than the run's own while that directory holds a run, to its
// subdirectory results-<model directory name>. The log says where.
// Each reads only the data it uses (data/dataset.h DataUse): eval the eval split, predict the test split.
// metric_key_prefix: HF evaluate(metric_key_prefix=...): metrics are named <prefix>_*, printed and saved as
// <prefix>_results.json. `generation_flags`: the overrides hold generation flags (--num-beams, ...), which
// need training.predict_with_generate (else UsageError: they would change nothing).
int run_eval(const std::string& target, const std::vector<std::string>& overrides,
             const std::string& metric_key_prefix = "eval", const std::string& model_dir = "",
             bool generation_flags = false);
// `prompts_file` (--prompts): predict one continuation per prompt of the file (data/prompts.h; jsonl / csv /
// tsv: the field `prompt_column`) instead of the test split; no data file is needed then.
int run_predict(const std::string& target, const std::vector<std::string>& overrides, const std::string& model_dir = "",
                const std::string& prompts_file = "", const std::string& prompt_column = "text");
int run_components();

// `hftrain search SPEC`: Optuna over the spec's search section (docs/search.md). n_trials is this process's
// count (as Optuna's optimize); storage "" = sqlite:///<output_dir>/study.db; study_name "" = hftrain-search;
// metric "" = HF's default objective, else an evaluation metric ("eval_loss" or "loss").
struct SearchRequest {
  std::string spec_path;
  std::vector<std::string> overrides;
  int64_t n_trials = 20;
  std::string storage;
  std::string study_name;
  std::string direction = "minimize";
  std::string metric;
};
int run_search(const SearchRequest& request);

// Exit path after an error: in a worker of a multi-process job, flushes the output and leaves at once
// (no destructors), so the other workers see closed connections now instead of a teardown that waits on
// their collectives; otherwise returns `exit_code`.
int finish_after_error(int exit_code);

}  // namespace hftrain
