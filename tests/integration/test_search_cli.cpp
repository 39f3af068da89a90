// `hftrain search` through the real binary, its study read back with Optuna's own Python API
// (optuna.load_study(...).trials, Debian's python3-optuna): a TPE search on the quickstart beats the spec's
// own values, two processes on one SQLite storage run disjoint trials of one study, the median and hyperband pruners stop
// a poor trial early, a trial with an invalid spec is recorded FAIL with its error, SIGINT leaves the study
// resumable, and a bad search section is refused (exit 2) at its file:line before anything runs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>

#include "cli_runner.h"

using namespace hftrain_test;
using json = nlohmann::json;

namespace {

bool optuna_available() { return run_shell("/usr/bin/python3 -c 'import optuna' 2>&1").exit_code == 0; }

// The study's trials as Optuna reads them: [{number, state, value, params, user_attrs, intermediate}].
json optuna_trials(const std::string& dir, const std::string& storage, const std::string& study) {
  const std::string script =
      "import json, optuna\n"
      "optuna.logging.set_verbosity(optuna.logging.WARNING)\n"
      "s = optuna.load_study(study_name='" + study + "', storage='" + storage + "')\n"
      "print(json.dumps([{'number': t.number, 'state': t.state.name, 'value': t.value, 'params': t.params,\n"
      "  'user_attrs': t.user_attrs, 'intermediate': {str(k): v for k, v in t.intermediate_values.items()}}\n"
      "  for t in s.trials]))\n";
  write_text(dir + "/read_study.py", script);
  const CliResult r = run_shell("cd '" + dir + "' && /usr/bin/python3 read_study.py 2>&1");
  REQUIRE(r.exit_code == 0);
  return json::parse(r.output);
}

// A tiny digit-reversal run evaluated every 10 of its 30 steps, plus `search`.
std::string small_spec(const std::string& search) {
  return "model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 32, dropout: 0.0}\n"
         "data: {type: digit_reversal, num_digits: 4, train_size: 2000, eval_size: 64, test_size: 8}\n"
         "training:\n  output_dir: runs/s\n  per_device_train_batch_size: 32\n  per_device_eval_batch_size: 64\n"
         "  max_steps: 30\n  learning_rate: 3.0e-3\n  logging_steps: 10\n  eval_strategy: steps\n  eval_steps: 10\n"
         "  save_strategy: \"no\"\n  seed: 42\n  report_to: none\n"
         "search:\n" + search;
}

const char* const kLrSpace = "  learning_rate: {type: float, low: 1.0e-4, high: 1.0e-2, log: true}\n";

}  // namespace

TEST_CASE("search: a bad search section is refused at its file:line before any trial", "[integration][search]") {
  const std::string dir = fresh_dir("search_config");
  struct Case {
    std::string search, expected;
  };
  const std::vector<Case> cases = {
      {"  learning_rate: {type: floaty, low: 1, high: 2}\n", "spec.yaml:16:25: search.learning_rate.type: 'floaty' is not float"},
      {"  learning_rate: {type: float, low: 1.0e-2, high: 1.0e-4}\n", "spec.yaml:16:37: search.learning_rate.low: low (1.0e-2) is above high"},
      {"  learning_rate: {type: float, low: 0, high: 1.0e-2, log: true}\n", "search.learning_rate.low: log: true needs low > 0"},
      {"  model.n_layer: {type: int, low: 1.5, high: 4}\n", "search.model.n_layer.low: an int dimension takes integers"},
      {"  learning_rate: {type: float, low: 1.0e-4, hihg: 1.0e-2}\n", "search.learning_rate.hihg: unknown key of a float dimension (did you mean 'high'?)"},
      {"  optim: {type: categorical, choices: []}\n", "search.optim.choices: required: a non-empty list"},
      {"  n_layerz: {type: int, low: 1, high: 2}\n", "spec.yaml:16:3: search.n_layerz: 'n_layerz' is no option of any section"},
      {"  model.n_layerz: {type: int, low: 1, high: 2}\n", "spec.yaml:16:3: search.model.n_layerz: the spec does not take model.n_layerz=1"},
      {std::string(kLrSpace) + "  sampler: {type: random, n_startup_trials: 3}\n",
       "spec.yaml:17:27: search.sampler.n_startup_trials: not an option of the random sampler"},
      {std::string(kLrSpace) + "  pruner: {type: median, min_resource: 3}\n",
       "search.pruner.min_resource: not an option of the median pruner"},
      {std::string(kLrSpace) + "  pruner: {type: medain}\n", "search.pruner.type"},
  };
  for (const auto& c : cases) {
    INFO(c.search);
    write_text(dir + "/spec.yaml", small_spec(c.search));
    const CliResult r = run_hftrain("search spec.yaml --n-trials 1", dir);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find(c.expected) != std::string::npos);
    CHECK(r.output.find("spec.yaml:1") != std::string::npos);  // every problem is located in the file
    CHECK_FALSE(std::filesystem::exists(dir + "/runs/s/study.db"));  // refused before the study is opened
  }
  write_text(dir + "/plain.yaml", small_spec(kLrSpace).substr(0, small_spec(kLrSpace).find("search:")));
  const CliResult none = run_hftrain("search plain.yaml", dir);
  CHECK(none.exit_code == 2);
  CHECK(none.output.find("no search section") != std::string::npos);
}

TEST_CASE("search: 12 TPE trials on the quickstart find a trial at least as good as the spec's own values",
          "[integration][search]") {
  if (!optuna_available()) {
    WARN("python3-optuna is not installed: the search runs are skipped");
    return;
  }
  const std::string dir = fresh_dir("search_quickstart");
  write_text(dir + "/spec.yaml", read_text(std::string(HFTRAIN_SOURCE_DIR) + "/configs/quickstart.yaml") +
                                     "search:\n" + kLrSpace + "  warmup_ratio: {type: float, low: 0, high: 0.2}\n"
                                     "  sampler: {type: tpe, seed: 7}\n  pruner: {type: none}\n");
  const std::string sets = " --set training.max_steps=60 --set training.eval_steps=30 --set training.logging_steps=30 "
                           "--set training.warmup_steps=0 --set data.train_size=4000 --set data.eval_size=128 "
                           "--set training.report_to=none";
  // The spec's own values (learning_rate 3e-3, no warmup), trained as they are.
  const CliResult base = run_hftrain("train spec.yaml" + sets + " --set training.output_dir=runs/default", dir);
  REQUIRE(base.exit_code == 0);
  double default_loss = -1;
  const json default_state = json::parse(read_text(dir + "/runs/default/trainer_state.json"));
  for (const auto& e : default_state.at("log_history"))
    if (e.contains("eval_loss")) default_loss = e["eval_loss"].get<double>();  // the last evaluation's, at step 60
  REQUIRE(default_loss > 0);
  const CliResult r = run_hftrain("search spec.yaml" + sets + " --set training.output_dir=runs/q --n-trials 12 --metric eval_loss", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const json trials = optuna_trials(dir, "sqlite:///runs/q/study.db", "hftrain-search");
  REQUIRE(trials.size() == 12);
  double best = 1e30;
  int64_t best_number = -1;
  for (const auto& t : trials) {
    CHECK(t["state"] == "COMPLETE");
    CHECK(t["params"].contains("learning_rate"));
    CHECK(t["params"].contains("warmup_ratio"));
    const double lr = t["params"]["learning_rate"].get<double>();
    CHECK((lr >= 1e-4 && lr <= 1e-2));
    // The value Optuna holds is the trial's own last eval_loss (its trainer_state.json, written by the trial).
    const std::string trial_dir = dir + "/runs/q/trial-" + std::to_string(t["number"].get<int>());
    double last = -1;
    const json state = json::parse(read_text(trial_dir + "/trainer_state.json"));
    for (const auto& e : state.at("log_history"))
      if (e.contains("eval_loss")) last = e["eval_loss"].get<double>();
    CHECK(t["value"].get<double>() == Approx(last).epsilon(1e-12));
    CHECK(t["intermediate"].size() == 2);  // reported at steps 30 and 60
    if (t["value"].get<double>() < best) best = t["value"].get<double>(), best_number = t["number"].get<int64_t>();
  }
  CHECK(best <= default_loss);
  const json best_file = json::parse(read_text(dir + "/runs/q/best_trial.json"));
  CHECK(best_file["number"] == best_number);
  CHECK(best_file["value"].get<double>() == best);
  CHECK(best_file["params"] == trials[best_number]["params"]);
  // The best trial's resolved spec is the one that trial ran.
  CHECK(read_text(dir + "/runs/q/best_run_spec.yaml") ==
        read_text(dir + "/runs/q/trial-" + std::to_string(best_number) + "/run_spec.yaml"));
  CHECK(r.output.find(std::to_string(best_number) + "*") != std::string::npos);  // the table marks it
}

TEST_CASE("search: two processes sharing one SQLite storage run disjoint trials of one study", "[integration][search]") {
  if (!optuna_available()) {
    WARN("python3-optuna is not installed: the search runs are skipped");
    return;
  }
  const std::string dir = fresh_dir("search_shared");
  write_text(dir + "/spec.yaml", small_spec(std::string(kLrSpace) + "  pruner: {type: none}\n"));
  const std::string cmd = "'" + std::string(HFTRAIN_BINARY) + "' search spec.yaml --n-trials 3 --storage sqlite:///shared.db "
                          "--study-name shared --metric eval_loss";
  const CliResult r = run_shell("cd '" + dir + "' && (" + cmd + " > a.log 2>&1 & " + cmd + " > b.log 2>&1 & wait %1; a=$?; wait %2; "
                                "echo \"rc $a $?\")");
  INFO(read_text(dir + "/a.log") << read_text(dir + "/b.log"));
  CHECK(r.output.find("rc 0 0") != std::string::npos);
  auto numbers_run_by = [&](const std::string& log) {
    std::set<int> numbers;
    std::istringstream in(read_text(dir + "/" + log));
    for (std::string line; std::getline(in, line);)
      if (line.rfind("trial ", 0) == 0 && line.find(": complete") != std::string::npos) numbers.insert(std::stoi(line.substr(6)));
    return numbers;
  };
  const std::set<int> a = numbers_run_by("a.log"), b = numbers_run_by("b.log");
  CHECK(a.size() == 3);
  CHECK(b.size() == 3);
  for (int n : a) CHECK(b.count(n) == 0);
  const json trials = optuna_trials(dir, "sqlite:///shared.db", "shared");
  REQUIRE(trials.size() == 6);
  std::set<std::string> dirs;
  for (const auto& t : trials) {
    CHECK(t["state"] == "COMPLETE");
    CHECK((a.count(t["number"].get<int>()) + b.count(t["number"].get<int>())) == 1);
    dirs.insert(t["user_attrs"]["output_dir"].get<std::string>());
    CHECK(std::filesystem::exists(t["user_attrs"]["output_dir"].get<std::string>() + "/model.safetensors"));
  }
  CHECK(dirs.size() == 6);
}

TEST_CASE("search: the median pruner stops a poor trial early and a trial with an invalid spec is recorded FAIL",
          "[integration][search]") {
  if (!optuna_available()) {
    WARN("python3-optuna is not installed: the search runs are skipped");
    return;
  }
  const std::string dir = fresh_dir("search_prune");
  write_text(dir + "/spec.yaml", small_spec("  learning_rate: {type: float, low: 1.0e-6, high: 1.0e-2, log: true}\n"
                                            "  optimizer.type: {type: categorical, choices: [adamw, no_such_optimizer]}\n"
                                            "  pruner: {type: median, n_startup_trials: 2, n_warmup_steps: 0}\n"));
  // The trials' parameters are fixed through Optuna's own enqueue_trial: two good, one poor, one invalid.
  write_text(dir + "/enqueue.py",
             "import optuna\n"
             "s = optuna.create_study(study_name='p', storage='sqlite:///p.db', direction='minimize')\n"
             "for lr, opt in [(1e-2, 'adamw'), (8e-3, 'adamw'), (1e-6, 'adamw'), (1e-3, 'no_such_optimizer')]:\n"
             "    s.enqueue_trial({'learning_rate': lr, 'optimizer.type': opt})\n");
  REQUIRE(run_shell("cd '" + dir + "' && /usr/bin/python3 enqueue.py 2>&1").exit_code == 0);
  const CliResult r = run_hftrain("search spec.yaml --n-trials 4 --storage sqlite:///p.db --study-name p --metric eval_loss", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const json trials = optuna_trials(dir, "sqlite:///p.db", "p");
  REQUIRE(trials.size() == 4);
  CHECK(trials[0]["state"] == "COMPLETE");
  CHECK(trials[1]["state"] == "COMPLETE");
  CHECK(trials[2]["state"] == "PRUNED");
  CHECK(trials[2]["params"]["learning_rate"].get<double>() == 1e-6);
  // Which step the median rule prunes at is Optuna's decision, and the trial trains on while it is asked
  // for: what hftrain controls is that the step recorded is the report that got the verdict (the last one
  // the study holds), with that evaluation's metrics, and that no report followed it.
  const json& intermediate = trials[2]["intermediate"];
  REQUIRE(!intermediate.empty());
  int last_reported = 0;
  for (const auto& kv : intermediate.items()) last_reported = std::max(last_reported, std::stoi(kv.key()));
  CHECK(trials[2]["user_attrs"]["pruned_at_step"].get<int>() == last_reported);
  CHECK(trials[2]["user_attrs"]["metrics"]["eval_loss"].get<double>() ==
        intermediate[std::to_string(last_reported)].get<double>());
  CHECK(trials[3]["state"] == "FAIL");
  const std::string error = trials[3]["user_attrs"].value("error", "");
  CHECK(error.find("optimizer.type") != std::string::npos);
  CHECK(error.find("no_such_optimizer") != std::string::npos);
  CHECK(trials[3]["user_attrs"]["exit_code"] == 2);
  CHECK(r.output.find("PRUNED") != std::string::npos);
  CHECK(r.output.find("FAIL") != std::string::npos);
}

TEST_CASE("search: the hyperband pruner stops a poor trial early", "[integration][search]") {
  if (!optuna_available()) {
    WARN("python3-optuna is not installed: the search runs are skipped");
    return;
  }
  const std::string dir = fresh_dir("search_hyperband");
  // One bracket (min_resource = max_resource = the first evaluation's step): successive halving with rungs at
  // steps 10 and 30, so that which trials compete does not depend on Optuna's hash of trial numbers.
  write_text(dir + "/spec.yaml", small_spec("  learning_rate: {type: float, low: 1.0e-6, high: 1.0e-2, log: true}\n"
                                            "  pruner: {type: hyperband, min_resource: 10, max_resource: 10, "
                                            "reduction_factor: 3}\n"));
  write_text(dir + "/enqueue.py",
             "import optuna\n"
             "s = optuna.create_study(study_name='h', storage='sqlite:///h.db', direction='minimize')\n"
             "for lr in [1e-2, 1e-6]:\n"
             "    s.enqueue_trial({'learning_rate': lr})\n");
  REQUIRE(run_shell("cd '" + dir + "' && /usr/bin/python3 enqueue.py 2>&1").exit_code == 0);
  const CliResult r = run_hftrain("search spec.yaml --n-trials 2 --storage sqlite:///h.db --study-name h --metric eval_loss", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const json trials = optuna_trials(dir, "sqlite:///h.db", "h");
  REQUIRE(trials.size() == 2);
  CHECK(trials[0]["state"] == "COMPLETE");
  CHECK(trials[0]["intermediate"].size() == 3);
  CHECK(trials[1]["state"] == "PRUNED");
  CHECK(trials[1]["params"]["learning_rate"].get<double>() == 1e-6);
  CHECK(trials[1]["intermediate"].size() < 3);
}

TEST_CASE("search: SIGINT stops the running trial and records it FAIL with exit 130, then a rerun continues the study",
          "[integration][search]") {
  if (!optuna_available()) {
    WARN("python3-optuna is not installed: the search runs are skipped");
    return;
  }
  const std::string dir = fresh_dir("search_sigint");
  write_text(dir + "/spec.yaml", small_spec(kLrSpace));
  const std::string search = "'" + std::string(HFTRAIN_BINARY) + "' search spec.yaml --metric eval_loss";
  // A long first trial; SIGINT once it has started training (its log says so).
  const CliResult r = run_shell("cd '" + dir + "' && (" + search + " --n-trials 3 --set training.max_steps=100000 > a.log 2>&1 & "
                                "p=$!; for i in $(seq 600); do grep -q 'Running training' runs/s/trial-0/trial.log 2>/dev/null && break; "
                                "sleep 0.1; done; sleep 1; kill -INT $p; wait $p; echo \"rc $?\")");
  const std::string log = read_text(dir + "/a.log");
  INFO(log);
  CHECK(r.output.find("rc 130") != std::string::npos);
  CHECK(log.find("run the same command again to continue") != std::string::npos);
  // The trial was stopped (SIGTERM: it finishes its step and exits), not left running.
  CHECK(read_text(dir + "/runs/s/trial-0/trial.log").find("SIGTERM") != std::string::npos);
  json trials = optuna_trials(dir, "sqlite:///runs/s/study.db", "hftrain-search");
  REQUIRE(trials.size() == 1);
  CHECK(trials[0]["state"] == "FAIL");
  CHECK(trials[0]["user_attrs"].value("error", "").find("SIGINT") != std::string::npos);
  const CliResult again = run_hftrain("search spec.yaml --metric eval_loss --n-trials 1", dir);
  INFO(again.output);
  CHECK(again.exit_code == 0);
  CHECK(again.output.find("(1 trials so far") != std::string::npos);
  trials = optuna_trials(dir, "sqlite:///runs/s/study.db", "hftrain-search");
  REQUIRE(trials.size() == 2);
  CHECK(trials[1]["number"] == 1);
  CHECK(trials[1]["state"] == "COMPLETE");
  CHECK(json::parse(read_text(dir + "/runs/s/best_trial.json"))["number"] == 1);
}

TEST_CASE("search: a language model's default objective is its eval_loss, and a piped log has no colour codes",
          "[integration][search]") {
  if (!optuna_available()) {
    WARN("python3-optuna is not installed: the search runs are skipped");
    return;
  }
  const std::string dir = fresh_dir("search_lm_objective");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "to be or not to be, that is the question " + std::to_string(i % 7) + "\n";
  write_text(dir + "/input.txt", text);
  write_text(dir + "/spec.yaml",
             "model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 32, dropout: 0.0}\n"
             "data: {type: text_file, path: input.txt, tokenizer: bytes, block_size: 32}\n"
             "training:\n  output_dir: runs/s\n  per_device_train_batch_size: 8\n  max_steps: 10\n"
             "  eval_strategy: steps\n  eval_steps: 10\n  save_strategy: \"no\"\n  seed: 42\n  report_to: none\n"
             "search:\n" + std::string(kLrSpace));
  // No --metric: HF's default_compute_objective. The evaluation holds eval_loss and eval_perplexity (= exp of the
  // loss, which run_clm adds after evaluate()), so the value must be the loss, not the perplexity.
  const CliResult r = run_hftrain("search spec.yaml --n-trials 1", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const json trials = optuna_trials(dir, "sqlite:///runs/s/study.db", "hftrain-search");
  REQUIRE(trials.size() == 1);
  const json& metrics = trials[0]["user_attrs"]["metrics"];
  REQUIRE(metrics.contains("eval_perplexity"));
  CHECK(trials[0]["value"].get<double>() == metrics["eval_loss"].get<double>());
  // Optuna's own log lines came through (a new study), without ANSI colour codes: the output is a pipe.
  CHECK(r.output.find("A new study created") != std::string::npos);
  CHECK(r.output.find("\x1b[") == std::string::npos);
}
