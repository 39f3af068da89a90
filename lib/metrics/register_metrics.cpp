// Registers the built-in metrics components (called from register_builtins()).
#include "metrics/metric.h"
#include "registry/registry.h"

namespace hftrain {

void register_metrics(Registry<Metric>& metrics) {
  metrics.add<AccuracyMetric>("accuracy", "Fraction of scored labels predicted correctly.");
  metrics.add<ExactMatchMetric>("exact_match", "Fraction of examples with every scored label correct.");
  metrics.add<PerplexityMetric>("perplexity", "exp(eval_loss).");
}

}  // namespace hftrain
