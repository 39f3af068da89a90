// `hftrain report RUN_DIR [RUN_DIR...] [-o report.html]`: one self-contained HTML page with the runs'
// training loss, evaluation metrics and learning rate plotted against the step (from each run's
// trainer_state.json), several runs overlaid.
#pragma once

#include <string>
#include <vector>

namespace hftrain {

struct ReportRequest {
  std::vector<std::string> run_dirs;  // run or checkpoint directories (or trainer_state.json files)
  std::string output;                 // "" = RUN_DIR/report.html for one run, ./report.html for several
};

int run_report(const ReportRequest& request);

}  // namespace hftrain
