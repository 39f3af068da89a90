// `hftrain search`: HF's trainer.hyperparameter_search(backend="optuna") as a command. The spec's `search`
// section is the space; Optuna (search/optuna_driver) samples, prunes and stores the study; each trial is a
// child `hftrain train` in output_dir/trial-<n>/ (search/trial_process) whose evaluations are reported to
// the pruner. Several processes sharing one storage work on one study.
#include <signal.h>

#include <filesystem>
#include <iostream>

#include "builtins/register_builtins.h"
#include "commands/commands.h"
#include "distributed/launcher.h"
#include "log/logger.h"
#include "search/objective.h"
#include "search/optuna_driver.h"
#include "search/trial_process.h"
#include "search/trial_table.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/signals.h"

namespace hftrain {
namespace fs = std::filesystem;
namespace {

// The overrides that make the base spec one trial's: where it writes, then its parameters.
std::vector<std::string> trial_overrides(const SearchRequest& request, const std::vector<SearchParam>& space,
                                         const nlohmann::json& params, const std::string& trial_dir) {
  std::vector<std::string> overrides = request.overrides;
  overrides.push_back("training.output_dir=" + yaml_quoted(trial_dir));
  overrides.push_back("training.overwrite_output_dir=true");  // the directory holds the trial's log already
  for (const auto& p : space)
    if (params.contains(p.name)) overrides.push_back(p.key + "=" + SearchParam::override_text(params[p.name]));
  return overrides;
}

// Every dimension's key must be one the spec takes: the spec is loaded with the dimension at its first value
// (low, or the first choice), before any trial starts, and a refusal names the dimension's line.
void check_space_keys(const SearchRequest& request, const SearchArgs& search, const ComponentCatalog& catalog) {
  Issues issues(request.spec_path);
  for (const auto& p : search.space) {
    const nlohmann::json first = p.type == "categorical" ? p.choices.at(0)
                                 : p.type == "int"       ? nlohmann::json(static_cast<int64_t>(p.low))
                                                         : nlohmann::json(p.low);
    const std::string assignment = p.key + "=" + SearchParam::override_text(first);
    std::vector<std::string> overrides = request.overrides;
    overrides.push_back(assignment);
    try {
      load_run_spec(request.spec_path, overrides, catalog);
    } catch (const ConfigError& e) {
      std::string why = e.what();
      if (why.rfind("invalid run spec", 0) == 0 && why.find('\n') != std::string::npos) why = why.substr(why.find('\n') + 1);
      issues.add_at(p.where, "search." + p.name, "the spec does not take " + assignment + ":\n" + why);
    }
  }
  issues.throw_if_any();
}

// The objective of the trial's last evaluation (HF reports each one and keeps the last); without any, that of
// its final evaluation (training.do_eval: eval_results.json).
nlohmann::json final_metrics(const TrialEnd& end, const std::string& trial_dir) {
  if (!end.evaluations.empty()) return end.evaluations.back().at("metrics");
  const std::string results = trial_dir + "/eval_results.json";
  if (fs::exists(results)) return nlohmann::json::parse(read_text_file(results));
  throw RuntimeFailure("search: the trial reported no evaluation (set training.eval_strategy, or training.do_eval, so that "
                       "it evaluates)");
}

std::string params_text(const nlohmann::json& params) {
  std::string text;
  for (const auto& kv : params.items()) text += (text.empty() ? "" : " ") + kv.key() + "=" + short_value(kv.value());
  return text;
}

struct Study {
  OptunaDriver& driver;
  const SearchRequest& request;
  const SearchArgs& search;
  std::string output_dir;
  std::string metric_key;
};

// Asks for one trial, runs it and tells Optuna how it ended. Returns the signal that stopped the search, or 0.
int run_one_trial(Study& s) {
  nlohmann::json space = nlohmann::json::array();
  for (const auto& p : s.search.space) space.push_back(p.to_json());
  const nlohmann::json asked = s.driver.call("ask", {{"space", space}});
  const int64_t number = asked.at("number").get<int64_t>();
  const nlohmann::json& params = asked.at("params");
  const std::string trial_dir = s.output_dir + "/trial-" + std::to_string(number);
  auto tell = [&](const std::string& state, const nlohmann::json& value, nlohmann::json attrs) {
    attrs["output_dir"] = trial_dir;
    nlohmann::json request = {{"number", number}, {"state", state}, {"attrs", attrs}};
    if (!value.is_null()) request["value"] = value;
    s.driver.call("tell", request);
    std::cout << "trial " << number << ": " << state << (value.is_null() ? "" : " value " + short_value(value)) << "  ("
              << params_text(params) << ")" << std::endl;
  };
  if (fs::exists(trial_dir) && !directory_is_empty(trial_dir)) {  // never write over another study's trial
    const std::string error = "its directory " + trial_dir + " exists and is not empty (a trial of another study?)";
    log_warning("search: trial " + std::to_string(number) + ": " + error);
    tell("fail", nullptr, {{"error", error}});
    return 0;
  }
  fs::create_directories(trial_dir);
  std::vector<std::string> argv = {self_executable(), "train", s.request.spec_path};
  for (const auto& o : trial_overrides(s.request, s.search.space, params, trial_dir)) argv.insert(argv.end(), {"--set", o});
  log_info("search: trial " + std::to_string(number) + " starts (" + params_text(params) + "), log " + trial_dir + "/trial.log");
  std::string report_error;
  const TrialEnd end = run_trial_process(argv, trial_dir + "/trial.log", [&](const nlohmann::json& evaluation) {
    double value = 0;
    try {
      value = trial_objective(evaluation.at("metrics"), s.metric_key);
    } catch (const RuntimeFailure& e) {
      report_error = e.what();  // the metric is missing: the trial cannot have a value; stop it now
      return true;
    }
    const nlohmann::json answer = s.driver.call("report", {{"number", number}, {"value", value}, {"step", evaluation.at("step")}});
    return answer.at("should_prune").get<bool>();
  });
  if (end.stop_signal != 0) {  // as Optuna's optimize on KeyboardInterrupt: the running trial is FAIL
    tell("fail", nullptr, {{"error", std::string("hftrain search was stopped by ") + signal_name(end.stop_signal)}});
    return end.stop_signal;
  }
  nlohmann::json last = end.evaluations.empty() ? nlohmann::json(nullptr) : end.evaluations.back().at("metrics");
  if (!report_error.empty()) {
    tell("fail", nullptr, {{"error", report_error}, {"metrics", last}});
  } else if (end.pruned) {
    const nlohmann::json& verdict = end.pruning_evaluation;  // not the last one read: the trial ran on meanwhile
    tell("pruned", nullptr, {{"metrics", verdict.at("metrics")}, {"pruned_at_step", verdict.at("step")}});
  } else if (end.exit_code != 0) {
    tell("fail", nullptr, {{"error", trial_failure_text(trial_dir + "/trial.log")}, {"exit_code", end.exit_code}});
  } else {
    try {
      const nlohmann::json metrics = final_metrics(end, trial_dir);
      tell("complete", trial_objective(metrics, s.metric_key), {{"metrics", metrics}});
    } catch (const RuntimeFailure& e) {
      tell("fail", nullptr, {{"error", std::string(e.what())}});
    }
  }
  return 0;
}

// best_trial.json (number, value, params, metrics, ...) and the best trial's resolved spec.
void write_best(Study& s, const nlohmann::json& best, const ComponentCatalog& catalog) {
  nlohmann::json summary = {{"number", best.at("number")},
                            {"value", best.at("value")},
                            {"params", best.at("params")},
                            {"metrics", best.at("user_attrs").value("metrics", nlohmann::json(nullptr))},
                            {"output_dir", best.at("user_attrs").value("output_dir", nlohmann::json(nullptr))},
                            {"direction", s.request.direction},
                            {"objective", s.metric_key.empty() ? "HF default_compute_objective" : s.metric_key}};
  write_file_atomic(s.output_dir + "/best_trial.json", summary.dump(4) + "\n");
  for (const auto& kv : best.at("params").items()) {
    bool known = false;
    for (const auto& p : s.search.space) known = known || p.name == kv.key();
    if (!known) {
      log_warning("search: the best trial has parameter '" + kv.key() + "', which this spec's search section lacks; "
                  "best_run_spec.yaml is not written");
      return;
    }
  }
  const std::string trial_dir = s.output_dir + "/trial-" + std::to_string(best.at("number").get<int64_t>());
  const RunSpec spec = load_run_spec(s.request.spec_path, trial_overrides(s.request, s.search.space, best.at("params"), trial_dir), catalog);
  write_file_atomic(s.output_dir + "/best_run_spec.yaml", saved_run_spec(spec, catalog));
}

}  // namespace

int run_search(const SearchRequest& request) {
  const Components& c = builtin_components();
  const ComponentCatalog catalog = c.catalog();
  if (request.n_trials < 1) throw ConfigError("--n-trials: must be at least 1");
  if (request.direction != "minimize" && request.direction != "maximize")
    throw ConfigError("--direction: '" + request.direction + "' is not minimize or maximize");
  const RunSpec spec = load_run_spec(request.spec_path, request.overrides, catalog);
  if (!spec.search)
    throw ConfigError(request.spec_path + ": no search section: hftrain search needs the space to search, e.g. "
                      "search: {learning_rate: {type: float, low: 1.0e-5, high: 1.0e-3, log: true}} (docs/search.md)");
  check_space_keys(request, *spec.search, catalog);
  const std::string output_dir = fs::absolute(spec.training.output_dir).lexically_normal().string();
  fs::create_directories(output_dir);
  const std::string storage = request.storage.empty() ? "sqlite:///" + output_dir + "/study.db" : request.storage;
  const std::string study_name = request.study_name.empty() ? "hftrain-search" : request.study_name;
  const std::string metric_key = objective_metric_key(request.metric);

  ::signal(SIGPIPE, SIG_IGN);  // a driver that died is an error from write(), not a silent exit
  OptunaDriver driver;
  const nlohmann::json opened = driver.call("open", {{"storage", storage},
                                                     {"study_name", study_name},
                                                     {"direction", request.direction},
                                                     {"sampler", spec.search->sampler_json()},
                                                     {"pruner", spec.search->pruner_json()}});
  std::cout << "search: study '" << study_name << "' in " << storage << " (" << opened.at("trials").get<int64_t>()
            << " trials so far, Optuna " << opened.at("optuna").get<std::string>() << "); " << request.n_trials
            << " trials here, objective " << (metric_key.empty() ? "HF's default (eval_loss or the sum of the metrics)" : metric_key)
            << ", " << request.direction << std::endl;
  Study study{driver, request, *spec.search, output_dir, metric_key};
  int stopped_by = 0;
  {
    StopSignalGuard guard("stopping the running trial (recorded FAIL); the study stays in its storage");
    for (int64_t i = 0; i < request.n_trials && stopped_by == 0; ++i) {
      stopped_by = pending_stop_signal();
      if (stopped_by == 0) stopped_by = run_one_trial(study);
    }
  }
  std::vector<std::string> names;
  for (const auto& p : spec.search->space) names.push_back(p.name);
  const nlohmann::json best = driver.call("best").at("best");
  const int64_t best_number = best.is_null() ? -1 : best.at("number").get<int64_t>();
  std::cout << "\n" << trials_table(driver.call("trials").at("trials"), names, best_number);
  if (!best.is_null()) {
    write_best(study, best, catalog);
    std::cout << "best trial " << best_number << ": value " << short_value(best.at("value")) << " ("
              << params_text(best.at("params")) << "); " << output_dir << "/best_trial.json, " << output_dir
              << "/best_run_spec.yaml" << std::endl;
  } else {
    std::cout << "no trial of the study has completed" << std::endl;
  }
  if (stopped_by != 0)
    throw StoppedBySignal(std::string("hftrain search stopped by ") + signal_name(stopped_by) + "; study '" + study_name +
                              "' in " + storage + " keeps every trial; run the same command again to continue it",
                          stopped_by, "");
  return 0;
}

}  // namespace hftrain
