// Evaluation metrics, accumulated batch by batch. Token metrics see aligned id tensors ([B] for
// classifiers, [B, T] for LMs after the causal shift; label -100 marks unscored positions); text metrics
// see generated texts and their references (training.predict_with_generate).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "config/schema.h"
#include "util/torch_compat.h"

namespace hftrain {

// What a metric scores: the model's token predictions, the decoded generated text, or either (text when
// evaluation generates).
enum class MetricInput { kTokens, kText, kTokensOrText };

class Metric {
 public:
  virtual ~Metric() = default;
  virtual MetricInput input() const { return MetricInput::kTokens; }
  virtual void update(const torch::Tensor& predictions, const torch::Tensor& labels) = 0;
  // One batch of generated texts and their references (metrics whose input() allows text).
  virtual void update_text(const std::vector<std::string>& predictions, const std::vector<std::string>& references);
  // `mean_loss` is the evaluation loss, for loss-derived metrics such as perplexity.
  virtual double compute(double mean_loss) const = 0;
  // The reported values: one named `key` by default; a metric with several values (rouge) names each.
  virtual std::vector<std::pair<std::string, double>> results(const std::string& key, double mean_loss) const {
    return {{key, compute(mean_loss)}};
  }
};

// `accuracy`: fraction of scored positions predicted correctly.
class AccuracyMetric : public Metric {
 public:
  struct Options {
    static void declare(Schema<Options>&) {}
  };
  explicit AccuracyMetric(const Options&) {}
  void update(const torch::Tensor& predictions, const torch::Tensor& labels) override;
  double compute(double) const override { return total_ ? static_cast<double>(correct_) / total_ : 0.0; }

 private:
  int64_t correct_ = 0, total_ = 0;
};

// `exact_match`: fraction of examples whose every scored position is correct; when evaluation generates,
// fraction of generated texts equal to their reference (HF evaluate's exact_match, no normalisation).
class ExactMatchMetric : public Metric {
 public:
  struct Options {
    static void declare(Schema<Options>&) {}
  };
  explicit ExactMatchMetric(const Options&) {}
  MetricInput input() const override { return MetricInput::kTokensOrText; }
  void update(const torch::Tensor& predictions, const torch::Tensor& labels) override;
  void update_text(const std::vector<std::string>& predictions, const std::vector<std::string>& references) override;
  double compute(double) const override { return total_ ? static_cast<double>(correct_) / total_ : 0.0; }

 private:
  int64_t correct_ = 0, total_ = 0;
};

// `perplexity`: exp(eval_loss).
class PerplexityMetric : public Metric {
 public:
  struct Options {
    static void declare(Schema<Options>&) {}
  };
  explicit PerplexityMetric(const Options&) {}
  void update(const torch::Tensor&, const torch::Tensor&) override {}
  double compute(double mean_loss) const override;
};

}  // namespace hftrain
