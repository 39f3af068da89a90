// Confusion-matrix metrics for single-label classification (scikit-learn definitions, zero_division=0):
// precision, recall, f1 with average macro | micro | binary, and matthews_corrcoef (multiclass form).
// Positions labelled -100 are not scored.
#pragma once

#include <map>
#include <utility>

#include "metrics/metric.h"

namespace hftrain {

class ConfusionCounts {
 public:
  void add(const torch::Tensor& predictions, const torch::Tensor& labels);
  // Per class: true positives, predicted count, true count. Classes = those seen in labels or predictions.
  struct ClassCounts {
    int64_t tp = 0, predicted = 0, actual = 0;
  };
  const std::map<int64_t, ClassCounts>& classes() const { return classes_; }
  int64_t total() const { return total_; }
  int64_t correct() const { return correct_; }

 private:
  std::map<int64_t, ClassCounts> classes_;
  int64_t total_ = 0, correct_ = 0;
};

// Which of precision / recall / f1 a PrfMetric reports.
enum class PrfKind { kPrecision, kRecall, kF1 };

class PrfMetric : public Metric {
 public:
  struct Options {
    std::string average = "macro";
    int64_t pos_label = 1;
    static void declare(Schema<Options>& s);
  };
  PrfMetric(const Options& options, PrfKind kind) : options_(options), kind_(kind) {}
  void update(const torch::Tensor& predictions, const torch::Tensor& labels) override { counts_.add(predictions, labels); }
  double compute(double) const override;

 private:
  Options options_;
  PrfKind kind_;
  ConfusionCounts counts_;
};

class PrecisionMetric : public PrfMetric {
 public:
  explicit PrecisionMetric(const Options& o) : PrfMetric(o, PrfKind::kPrecision) {}
};
class RecallMetric : public PrfMetric {
 public:
  explicit RecallMetric(const Options& o) : PrfMetric(o, PrfKind::kRecall) {}
};
class F1Metric : public PrfMetric {
 public:
  explicit F1Metric(const Options& o) : PrfMetric(o, PrfKind::kF1) {}
};

class MatthewsCorrcoefMetric : public Metric {
 public:
  struct Options {
    static void declare(Schema<Options>&) {}
  };
  explicit MatthewsCorrcoefMetric(const Options&) {}
  void update(const torch::Tensor& predictions, const torch::Tensor& labels) override { counts_.add(predictions, labels); }
  double compute(double) const override;

 private:
  ConfusionCounts counts_;
};

}  // namespace hftrain
