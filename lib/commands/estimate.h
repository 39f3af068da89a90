// `hftrain estimate SPEC [--nproc-per-node N] [--nnodes M] [--memory-per-rank SIZE] [--json]`: before a
// launch, the model's size (from its options or a from_pretrained config.json, without building it) and
// a table of per-rank memory for ZeRO stages 0-3 x fp32/bf16 x offload none/cpu/nvme, with DeepSpeed's
// estimator figures beside hftrain's, activations with and without gradient checkpointing, the spec's
// own choice marked, and the cheapest configuration that fits the memory per rank.
#pragma once

#include <string>
#include <vector>

namespace hftrain {

struct EstimateRequest {
  std::string spec_path;
  std::vector<std::string> overrides;
  std::string nproc_per_node;    // "" = distributed.nproc_per_node; a number or "auto" (one per visible GPU)
  int nnodes = 1;
  std::string memory_per_rank;   // "" = this machine's available memory / local workers; else e.g. 16GB, 24GiB
  bool json = false;             // print the estimate as JSON (for scripts)
};

int run_estimate(const EstimateRequest& request);

}  // namespace hftrain
