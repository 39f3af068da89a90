// Metric implementations (see metric.h).
#include "metrics/metric.h"

#include <cmath>

#include "util/error.h"

namespace hftrain {

void Metric::update_text(const std::vector<std::string>&, const std::vector<std::string>&) {
  throw RuntimeFailure("this metric scores token predictions, not generated text");
}

void AccuracyMetric::update(const torch::Tensor& predictions, const torch::Tensor& labels) {
  auto valid = labels.ne(-100);
  correct_ += predictions.eq(labels).logical_and(valid).sum().item<int64_t>();
  total_ += valid.sum().item<int64_t>();
}

void ExactMatchMetric::update(const torch::Tensor& predictions, const torch::Tensor& labels) {
  auto valid = labels.ne(-100);
  auto wrong = predictions.ne(labels).logical_and(valid);
  if (wrong.dim() > 1) wrong = wrong.flatten(1).any(1);
  correct_ += wrong.logical_not().sum().item<int64_t>();
  total_ += labels.size(0);
}

void ExactMatchMetric::update_text(const std::vector<std::string>& predictions, const std::vector<std::string>& references) {
  if (predictions.size() != references.size())
    throw RuntimeFailure("exact_match: " + std::to_string(predictions.size()) + " predictions for " +
                         std::to_string(references.size()) + " references");
  for (std::size_t i = 0; i < predictions.size(); ++i) correct_ += predictions[i] == references[i];
  total_ += static_cast<int64_t>(predictions.size());
}

double PerplexityMetric::compute(double mean_loss) const { return std::exp(mean_loss); }

}  // namespace hftrain
