// Confusion-matrix metrics (see classification.h).
#include "metrics/classification.h"

#include <cmath>

namespace hftrain {

void ConfusionCounts::add(const torch::Tensor& predictions, const torch::Tensor& labels) {
  auto valid = labels.ne(-100);
  auto p = predictions.masked_select(valid).to(torch::kLong).contiguous();
  auto t = labels.masked_select(valid).to(torch::kLong).contiguous();
  const int64_t* pp = p.data_ptr<int64_t>();
  const int64_t* tp = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < p.numel(); ++i) {
    classes_[pp[i]].predicted += 1;
    classes_[tp[i]].actual += 1;
    if (pp[i] == tp[i]) {
      classes_[tp[i]].tp += 1;
      correct_ += 1;
    }
    total_ += 1;
  }
}

void PrfMetric::Options::declare(Schema<Options>& s) {
  s.add("average", &Options::average, "How per-class scores combine (scikit-learn's average).")
      .choices({"macro", "micro", "binary"});
  s.add("pos_label", &Options::pos_label, "The positive class for average: binary.");
}

namespace {

double safe_div(double a, double b) { return b == 0 ? 0.0 : a / b; }

double score(PrfKind kind, double tp, double predicted, double actual) {
  const double precision = safe_div(tp, predicted), recall = safe_div(tp, actual);
  switch (kind) {
    case PrfKind::kPrecision: return precision;
    case PrfKind::kRecall: return recall;
    case PrfKind::kF1: return safe_div(2 * tp, predicted + actual);  // = 2PR/(P+R), 0 when undefined
  }
  return 0;
}

}  // namespace

double PrfMetric::compute(double) const {
  const auto& classes = counts_.classes();
  if (options_.average == "binary") {
    auto it = classes.find(options_.pos_label);
    if (it == classes.end()) return 0.0;
    return score(kind_, it->second.tp, it->second.predicted, it->second.actual);
  }
  if (options_.average == "micro") {
    // Single-label: every prediction and every label is counted once, so micro P = R = F1 = accuracy.
    return safe_div(counts_.correct(), counts_.total());
  }
  double sum = 0;
  for (const auto& [cls, c] : classes) sum += score(kind_, c.tp, c.predicted, c.actual);
  return classes.empty() ? 0.0 : sum / static_cast<double>(classes.size());
}

double MatthewsCorrcoefMetric::compute(double) const {
  // Multiclass MCC (Gorodkin 2004, scikit-learn's matthews_corrcoef):
  // (c*s - sum p_k t_k) / sqrt((s^2 - sum p_k^2) (s^2 - sum t_k^2)); 0 when the denominator is 0.
  const double s = static_cast<double>(counts_.total()), c = static_cast<double>(counts_.correct());
  double pt = 0, pp = 0, tt = 0;
  for (const auto& [cls, k] : counts_.classes()) {
    pt += static_cast<double>(k.predicted) * static_cast<double>(k.actual);
    pp += static_cast<double>(k.predicted) * static_cast<double>(k.predicted);
    tt += static_cast<double>(k.actual) * static_cast<double>(k.actual);
  }
  const double denom = std::sqrt((s * s - pp) * (s * s - tt));
  return denom == 0 ? 0.0 : (c * s - pt) / denom;
}

}  // namespace hftrain
