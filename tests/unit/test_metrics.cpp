// Metrics against hand-computed values (scikit-learn definitions, zero_division = 0).
#include <catch2/catch.hpp>

#include "builtins/register_builtins.h"
#include "metrics/classification.h"

using namespace hftrain;

namespace {

double run_metric(const std::string& type, const std::string& options_yaml, std::vector<int64_t> pred,
                  std::vector<int64_t> label) {
  const auto& c = builtin_components();
  Issues issues("test");
  auto opts = c.metrics.parse(type, YAML::Load(options_yaml), "metrics", issues, {});
  REQUIRE(issues.empty());
  auto m = c.metrics.build(type, opts);
  m->update(torch::tensor(pred), torch::tensor(label));
  return m->compute(0.5);
}

// y_true = [0, 0, 1, 1, 2, 2, 2], y_pred = [0, 1, 1, 1, 2, 0, 2]
// class 0: tp 1, pred 2, true 2 -> P 1/2, R 1/2, F1 1/2
// class 1: tp 2, pred 3, true 2 -> P 2/3, R 1,   F1 4/5
// class 2: tp 2, pred 2, true 3 -> P 1,   R 2/3, F1 4/5
const std::vector<int64_t> kPred = {0, 1, 1, 1, 2, 0, 2}, kTrue = {0, 0, 1, 1, 2, 2, 2};

}  // namespace

TEST_CASE("precision, recall and f1 with macro / micro / binary averages", "[unit][metrics]") {
  CHECK(run_metric("precision", "{}", kPred, kTrue) == Approx((0.5 + 2.0 / 3 + 1.0) / 3));
  CHECK(run_metric("recall", "{}", kPred, kTrue) == Approx((0.5 + 1.0 + 2.0 / 3) / 3));
  CHECK(run_metric("f1", "{}", kPred, kTrue) == Approx((0.5 + 0.8 + 0.8) / 3));
  CHECK(run_metric("f1", "{average: micro}", kPred, kTrue) == Approx(5.0 / 7));
  CHECK(run_metric("f1", "{average: binary, pos_label: 1}", kPred, kTrue) == Approx(0.8));
  CHECK(run_metric("precision", "{average: binary, pos_label: 1}", kPred, kTrue) == Approx(2.0 / 3));
}

TEST_CASE("matthews_corrcoef (multiclass form)", "[unit][metrics]") {
  // c = 5, s = 7, p = (2,3,2), t = (2,2,3): (35 - (4+6+6)) / sqrt((49-17)(49-17)) = 19/32
  CHECK(run_metric("matthews_corrcoef", "{}", kPred, kTrue) == Approx(19.0 / 32));
  // binary: perfect = 1, inverted = -1, constant prediction = 0
  CHECK(run_metric("matthews_corrcoef", "{}", {0, 1, 0, 1}, {0, 1, 0, 1}) == Approx(1.0));
  CHECK(run_metric("matthews_corrcoef", "{}", {1, 0, 1, 0}, {0, 1, 0, 1}) == Approx(-1.0));
  CHECK(run_metric("matthews_corrcoef", "{}", {1, 1, 1, 1}, {0, 1, 0, 1}) == 0.0);
}

TEST_CASE("accuracy, exact_match and -100 masking", "[unit][metrics]") {
  CHECK(run_metric("accuracy", "{}", kPred, kTrue) == Approx(5.0 / 7));
  const auto& c = builtin_components();
  auto em = c.metrics.build("exact_match", nullptr);
  // two sequences: first correct on scored positions, second wrong at one scored position
  em->update(torch::tensor({{1, 9, 3}, {1, 2, 4}}), torch::tensor({{-100, 2, 3}, {-100, 2, 3}}).index({torch::indexing::Slice()}) *
                                                        torch::tensor({{1, 1, 1}, {1, 1, 1}}));
  CHECK(em->compute(0) == Approx(0.0));  // first row: 9 != 2 -> wrong; second row: 4 != 3 -> wrong
  auto em2 = c.metrics.build("exact_match", nullptr);
  em2->update(torch::tensor({{7, 2, 3}, {1, 2, 4}}), torch::tensor({{-100, 2, 3}, {-100, 2, 3}}));
  CHECK(em2->compute(0) == Approx(0.5));
  auto acc = c.metrics.build("accuracy", nullptr);
  acc->update(torch::tensor({{7, 2, 3}, {1, 2, 4}}), torch::tensor({{-100, 2, 3}, {-100, 2, 3}}));
  CHECK(acc->compute(0) == Approx(3.0 / 4));
  CHECK(c.metrics.build("perplexity", nullptr)->compute(std::log(5.0)) == Approx(5.0));
}
