// The command line as HF users type it: HfArgumentParser flags after the spec (`--learning_rate 1e-4`,
// `--learning_rate=1e-4`, `--do_eval`, `--bf16 true`, run_clm's `--model_name_or_path` / `--train_file` /
// `--block_size`) are the overrides they stand for (`--set training.learning_rate=1e-4`), and the
// `--local_rank=N` that torch.distributed.launch passes is checked against the launcher's environment.
// No LibTorch, no CLI11: the executable hands in the arguments and the options it knows itself.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace hftrain {

// The run-spec key an HF-style flag name sets ("learning_rate" -> "training.learning_rate",
// "model_name_or_path" -> "model.from_pretrained"), and whether HF parses it as a boolean (a bare flag is
// true). nullopt: no such HF flag.
struct HfFlag {
  std::string key;
  bool boolean = false;
};
std::optional<HfFlag> find_hf_flag(const std::string& name);

// Every HF flag name (for did-you-mean).
std::vector<std::string> hf_flag_names();

// Rewrites `args` (the words after the subcommand): each `--name value` / `--name=value` that is not one of
// the command's own options (`is_own_option("--name")`) and is an HF flag becomes `--set key=value`,
// appended at the end; booleans take HF's spellings (bare = true, true/false/yes/no/t/f/y/n/1/0, and
// `--no_name` = false). An unknown `--name` with an underscore, or one given without its value, is a
// ConfigError naming it, with a did-you-mean. Other words are kept in order.
std::vector<std::string> rewrite_hf_flags(const std::vector<std::string>& args,
                                          const std::function<bool(const std::string&)>& is_own_option);

// torch.distributed.launch's `--local_rank=N` / `--local-rank=N` / `--local_rank N` (anywhere in `args`;
// the launcher puts it before the subcommand): removed from `args`, and its value returned (nullopt when
// absent). A value that is not an integer >= -1 is a ConfigError.
std::optional<int> take_local_rank_flag(std::vector<std::string>& args);

// Checks the flag against the launcher's environment (`env(name)`: the value, or nullopt when unset):
// with LOCAL_RANK set, both must agree (ConfigError naming both otherwise); without it, the flag is the
// local rank of a worker that RANK / WORLD_SIZE describe, returned to be exported as LOCAL_RANK; with no
// launcher environment at all only -1 or 0 (one process) is accepted. Returns the LOCAL_RANK to export, or
// nullopt when nothing is to be set.
std::optional<int> check_local_rank_flag(int flag, const std::function<std::optional<std::string>(const std::string&)>& env);

}  // namespace hftrain
