// `hftrain data inspect SPEC [--split train] [--n N] [--json]`: the first N examples of a split as the run
// would train on them (Axolotl's `preprocess --debug`): the text the tokens spell, the token ids, which tokens
// carry loss (labels, -100 where masked) and, for packed rows (data.packing), the boundaries of the examples
// in the row. --json prints one JSON object per example and line: index, text, input_ids, labels, boundaries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hftrain {

struct DataInspectRequest {
  std::string spec_path;
  std::vector<std::string> overrides;
  std::string split = "train";  // train, eval (or validation), test
  int64_t n = 3;
  bool json = false;
};

int run_data_inspect(const DataInspectRequest& request);

}  // namespace hftrain
