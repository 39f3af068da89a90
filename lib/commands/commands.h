// The user-facing commands behind `hftrain <command>`; app/ only parses arguments and maps errors.
#pragma once

#include <string>
#include <vector>

namespace hftrain {

struct TrainRequest {
  std::string spec_path;
  std::vector<std::string> overrides;
  bool dump_config = false;
  std::string resume;  // --resume [PATH]: "" = not given, "last" when given bare, else a checkpoint directory
};

int run_train(const TrainRequest& request);
// `target` is a run spec file or a finished run directory (holding run_spec.yaml).
int run_eval(const std::string& target, const std::vector<std::string>& overrides);
int run_predict(const std::string& target, const std::vector<std::string>& overrides);
int run_zero_to_fp32(const std::string& checkpoint_dir, const std::string& output);
int run_components();

}  // namespace hftrain
