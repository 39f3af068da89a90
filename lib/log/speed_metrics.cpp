// Throughput figures (see speed_metrics.h).
#include "log/speed_metrics.h"

#include "log/metrics_format.h"

namespace hftrain {

double training_flos(const ParameterCounts& counts, int64_t tokens) {
  return 6.0 * static_cast<double>(tokens) * static_cast<double>(counts.non_embedding);
}

nlohmann::json speed_metrics(const std::string& split, double runtime, int64_t samples, int64_t steps,
                             std::optional<int64_t> tokens) {
  nlohmann::json m;
  m[split + "_runtime"] = python_round(runtime, 4);
  if (runtime == 0) return m;
  if (samples) m[split + "_samples_per_second"] = python_round(static_cast<double>(samples) / runtime, 3);
  if (steps) m[split + "_steps_per_second"] = python_round(static_cast<double>(steps) / runtime, 3);
  if (tokens) m[split + "_tokens_per_second"] = python_round(static_cast<double>(*tokens) / runtime, 3);
  return m;
}

}  // namespace hftrain
