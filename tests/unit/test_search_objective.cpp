// The objective of a search trial (HF's default_compute_objective, or one named metric) and the --set text of
// the values Optuna suggests.
#include <catch2/catch.hpp>

#include "runspec/search_args.h"
#include "search/objective.h"
#include "util/error.h"

using namespace hftrain;
using json = nlohmann::json;

TEST_CASE("search objective: HF's default and a named metric", "[unit][search]") {
  // Only the loss besides epoch and speed figures: the loss.
  const json loss_only = {{"eval_loss", 1.25}, {"epoch", 2.0}, {"eval_runtime", 0.5}, {"eval_samples_per_second", 100.0},
                          {"eval_steps_per_second", 3.0}};
  CHECK(trial_objective(loss_only, "") == 1.25);
  // A language model's perplexity is its loss in another form (run_clm adds it after evaluate()): the loss.
  const json with_perplexity = {{"eval_loss", 1.25}, {"eval_perplexity", 3.4903429574618414}, {"epoch", 2.0}};
  CHECK(trial_objective(with_perplexity, "") == 1.25);
  CHECK(trial_objective(with_perplexity, objective_metric_key("perplexity")) == 3.4903429574618414);
  // Other metrics: their sum, without the loss, epoch, speed and memory figures.
  const json with_metrics = {{"eval_loss", 1.25}, {"eval_accuracy", 0.5}, {"eval_f1", 0.25}, {"epoch", 2.0},
                             {"eval_runtime", 0.5}, {"eval_compilation_time", 1.0}, {"eval_mem_cpu_alloc_delta", 4096}};
  CHECK(trial_objective(with_metrics, "") == 0.75);
  CHECK(trial_objective(with_metrics, objective_metric_key("loss")) == 1.25);
  CHECK(trial_objective(with_metrics, objective_metric_key("eval_f1")) == 0.25);
  CHECK(objective_metric_key("") == "");
  CHECK_THROWS_WITH(trial_objective(with_metrics, "eval_bleu"), Catch::Contains("no number 'eval_bleu'") &&
                                                                   Catch::Contains("eval_accuracy"));
  CHECK_THROWS_AS(trial_objective(json{{"eval_loss", nullptr}}, "eval_loss"), RuntimeFailure);
  CHECK_THROWS_AS(trial_objective(json{{"epoch", 1.0}}, ""), RuntimeFailure);
}

TEST_CASE("search values as --set text keep their type", "[unit][search]") {
  CHECK(SearchParam::override_text(json(0.1)) == "0.10000000000000001");  // 17 digits: the same double back
  CHECK(std::stod(SearchParam::override_text(json(0.0006824078427098838))) == 0.0006824078427098838);
  CHECK(SearchParam::override_text(json(4)) == "4");
  CHECK(SearchParam::override_text(json("adamw")) == "\"adamw\"");
  CHECK(SearchParam::override_text(json("a\"b")) == "\"a\\\"b\"");
  CHECK(SearchParam::override_text(json(true)) == "true");
  CHECK(SearchParam::override_text(json(nullptr)) == "null");
}
