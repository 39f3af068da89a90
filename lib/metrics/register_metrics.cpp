// Registers the built-in metrics components (called from register_builtins()).
#include "metrics/classification.h"
#include "metrics/generated_text_metrics.h"
#include "metrics/metric.h"
#include "registry/registry.h"

namespace hftrain {

void register_metrics(Registry<Metric>& metrics) {
  metrics.add<AccuracyMetric>("accuracy", "Fraction of scored labels predicted correctly.");
  metrics.add<ExactMatchMetric>("exact_match", "Fraction of examples with every scored label correct.");
  metrics.add<PerplexityMetric>("perplexity", "exp(eval_loss).");
  metrics.add<PrecisionMetric>("precision", "Precision (scikit-learn; average macro | micro | binary).");
  metrics.add<RecallMetric>("recall", "Recall (scikit-learn; average macro | micro | binary).");
  metrics.add<F1Metric>("f1", "F1 score (scikit-learn; average macro | micro | binary).");
  metrics.add<RougeMetric>("rouge", "ROUGE F-measures of generated text (rouge_score; training.predict_with_generate).");
  metrics.add<BleuMetric>("bleu", "Corpus BLEU of generated text (sacreBLEU 13a, exp smoothing; training.predict_with_generate).");
  metrics.add<MatthewsCorrcoefMetric>("matthews_corrcoef", "Matthews correlation coefficient (multiclass form).");
}

}  // namespace hftrain
