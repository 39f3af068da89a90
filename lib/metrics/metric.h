// Evaluation metrics, accumulated batch by batch. predictions and labels are aligned id tensors
// ([B] for classifiers, [B, T] for LMs after the causal shift); label -100 marks unscored positions.
#pragma once

#include "config/schema.h"
#include "util/torch_compat.h"

namespace hftrain {

class Metric {
 public:
  virtual ~Metric() = default;
  virtual void update(const torch::Tensor& predictions, const torch::Tensor& labels) = 0;
  // `mean_loss` is the evaluation loss, for loss-derived metrics such as perplexity.
  virtual double compute(double mean_loss) const = 0;
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

// `exact_match`: fraction of examples whose every scored position is correct.
class ExactMatchMetric : public Metric {
 public:
  struct Options {
    static void declare(Schema<Options>&) {}
  };
  explicit ExactMatchMetric(const Options&) {}
  void update(const torch::Tensor& predictions, const torch::Tensor& labels) override;
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
