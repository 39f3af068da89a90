// The report command (see report.h).
#include "commands/report.h"

#include <filesystem>
#include <iostream>
#include <map>

#include <yaml-cpp/yaml.h>

#include "log/report_html.h"
#include "log/report_plots.h"
#include "util/error.h"
#include "util/fs.h"

namespace hftrain {
namespace fs = std::filesystem;
namespace {

RunHistory load_run(const std::string& target) {
  fs::path path(target);
  if (fs::is_directory(path)) path /= "trainer_state.json";
  if (!fs::exists(path))
    throw ConfigError("'" + target + "' is not a run directory: it has no trainer_state.json (train a model first)");
  RunHistory run;
  try {
    run.state = nlohmann::json::parse(read_text_file(path.string()));
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeFailure("'" + path.string() + "' is not valid JSON: " + e.what());
  }
  if (!run.state.is_object() || !run.state.contains("log_history") || !run.state["log_history"].is_array())
    throw RuntimeFailure("'" + path.string() + "' has no log_history list");
  fs::path dir = fs::path(target).lexically_normal();
  if (!fs::is_directory(target)) dir = dir.parent_path();
  if (dir.filename().empty()) dir = dir.parent_path();  // "runs/a/" -> "runs/a"
  run.source = target;
  // trainer_state.json does not name the metric of best_metric; an hftrain run directory's run_spec.yaml
  // does (HF's rule: metric_for_best_model, "loss" when only load_best_model_at_end & co. asked for one).
  const fs::path spec = dir / "run_spec.yaml";
  if (fs::exists(spec)) {
    try {
      const YAML::Node metric = YAML::LoadFile(spec.string())["training"]["metric_for_best_model"];
      const std::string m = metric && metric.IsScalar() && !metric.as<std::string>().empty() ? metric.as<std::string>() : "loss";
      run.best_metric_name = m.rfind("eval_", 0) == 0 ? m : "eval_" + m;
    } catch (const YAML::Exception&) {
      run.best_metric_name.clear();  // a damaged spec only loses the name
    }
  }
  run.label = dir.filename().string();
  if (run.label.empty() || run.label == ".") run.label = fs::absolute(dir).lexically_normal().filename().string();
  return run;
}

}  // namespace

int run_report(const ReportRequest& request) {
  if (request.run_dirs.empty()) throw ConfigError("report: give at least one run directory");
  std::vector<RunHistory> runs;
  for (const auto& d : request.run_dirs) runs.push_back(load_run(d));
  // Labels must tell runs apart: fall back to the path as given when two directories share a name.
  std::map<std::string, int> seen;
  for (const auto& r : runs) ++seen[r.label];
  for (auto& r : runs)
    if (seen[r.label] > 1) r.label = r.source;

  std::string output = request.output;
  if (output.empty()) {
    output = runs.size() == 1 && fs::is_directory(request.run_dirs[0])
                 ? (fs::path(request.run_dirs[0]) / "report.html").string()
                 : std::string("report.html");
  }
  write_file_atomic(output, render_report_html(runs));
  std::cout << "report written to " << output << " (" << runs.size() << " run" << (runs.size() == 1 ? "" : "s") << ", "
            << collect_plots(runs).size() << " plots)" << std::endl;
  return 0;
}

}  // namespace hftrain
