// The command line as HF users give it, turned into hftrain's own before CLI11 parses it: the `--local_rank`
// of torch.distributed.launch (checked against the launcher's environment), HfArgumentParser flags after
// a spec (`--learning_rate 1e-4` = `--set training.learning_rate=1e-4`) and underscores in hftrain's own
// flags (`--nproc_per_node` = `--nproc-per-node`). The rules live in lib/runspec/hf_flags.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace hftrain {

// argv (the program name first) as hftrain's own arguments. Throws ConfigError for a bad --local_rank or an
// unknown HF-style flag.
std::vector<std::string> adapt_hf_command_line(const CLI::App& app, int argc, char** argv);

}  // namespace hftrain
