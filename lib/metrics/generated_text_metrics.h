// The text metrics as evaluation metric components (training.predict_with_generate): `rouge` (one value
// per rouge type, named as HF evaluate's rouge names them: rouge1, rouge2, rougeL, rougeLsum) and `bleu`
// (sacreBLEU's corpus score, 0-100). Both score the decoded generated texts against the references over
// the whole evaluation set, streamed: each batch's texts are scored as they come and only the corpus
// statistics are kept (HF batch_eval_metrics); the arithmetic is metrics/text_metrics.
#pragma once

#include "metrics/metric.h"
#include "metrics/text_metrics.h"

namespace hftrain {

// A corpus-level score of generated texts, fed one example (and its reference) at a time.
class CorpusTextMetric : public Metric {
 public:
  MetricInput input() const override { return MetricInput::kText; }
  void update(const torch::Tensor&, const torch::Tensor&) override;
  void update_text(const std::vector<std::string>& predictions, const std::vector<std::string>& references) override;

 protected:
  virtual void add(const std::string& prediction, const std::string& reference) = 0;
};

class RougeMetric : public CorpusTextMetric {
 public:
  struct Options {
    std::vector<std::string> rouge_types = {"rouge1", "rouge2", "rougeL", "rougeLsum"};
    bool use_stemmer = false;
    static void declare(Schema<Options>& s);
  };
  explicit RougeMetric(const Options& options);
  double compute(double mean_loss) const override;  // the first rouge type's value
  // Mean F-measure per rouge type (0-1), reported as <type>; a metric named other than "rouge" prefixes
  // its name (name: summary -> summary_rouge1, ...).
  std::vector<std::pair<std::string, double>> results(const std::string& key, double mean_loss) const override;

 private:
  void add(const std::string& prediction, const std::string& reference) override { rouge_.add(prediction, {reference}); }
  RougeAccumulator rouge_;
};

class BleuMetric : public CorpusTextMetric {
 public:
  struct Options {
    static void declare(Schema<Options>&) {}
  };
  explicit BleuMetric(const Options&) {}
  double compute(double mean_loss) const override;

 private:
  void add(const std::string& prediction, const std::string& reference) override { bleu_.add(prediction, {reference}); }
  BleuAccumulator bleu_;
};

}  // namespace hftrain
