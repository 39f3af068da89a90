// Text metric components (see generated_text_metrics.h).
#include "metrics/generated_text_metrics.h"

#include "util/error.h"

namespace hftrain {

void CorpusTextMetric::update(const torch::Tensor&, const torch::Tensor&) {
  throw RuntimeFailure("text metrics score generated text (training.predict_with_generate), not token predictions");
}

void CorpusTextMetric::update_text(const std::vector<std::string>& predictions, const std::vector<std::string>& references) {
  if (predictions.size() != references.size())
    throw RuntimeFailure("text metric: " + std::to_string(predictions.size()) + " predictions for " +
                         std::to_string(references.size()) + " references");
  for (std::size_t i = 0; i < predictions.size(); ++i) add(predictions[i], references[i]);
}

void RougeMetric::Options::declare(Schema<Options>& s) {
  s.add("rouge_types", &Options::rouge_types, "ROUGE variants reported: rouge1 .. rouge9, rougeL, rougeLsum.");
  s.add("use_stemmer", &Options::use_stemmer,
        "Porter-stem tokens longer than 3 characters (rouge_score's use_stemmer; HF run_summarization.py sets it, "
        "HF evaluate's rouge defaults to false).");
}

namespace {

RougeOptions rouge_options(const RougeMetric::Options& options) {
  if (options.rouge_types.empty()) throw ConfigError("metrics: rouge.rouge_types is empty; name at least one type");
  RougeOptions o;
  o.rouge_types = options.rouge_types;
  o.use_stemmer = options.use_stemmer;
  return o;
}

}  // namespace

RougeMetric::RougeMetric(const Options& options) : rouge_(rouge_options(options)) {}  // refuses unknown types

double RougeMetric::compute(double mean_loss) const { return results("rouge", mean_loss).front().second; }

std::vector<std::pair<std::string, double>> RougeMetric::results(const std::string& key, double) const {
  auto scores = rouge_.result();
  if (key != "rouge")
    for (auto& [name, value] : scores) name = key + "_" + name;
  return scores;
}

double BleuMetric::compute(double) const { return bleu_.result().score; }

}  // namespace hftrain
