// Writes each evaluation of a search trial to the descriptor `hftrain search` gave it (see trial_report.h).
#include "train/trial_report.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include "util/error.h"
#include "util/fd_io.h"

namespace hftrain {

void TrialReportCallback::on_evaluate(const TrainerState& s, TrainerControl&, const nlohmann::json& metrics) {
  const std::string line = nlohmann::json{{"step", s.global_step}, {"epoch", s.epoch}, {"metrics", metrics}}.dump() + "\n";
  if (!write_all(fd_, line))  // one line, whole: the reader may act on it at once
    throw RuntimeFailure(std::string("search trial: cannot report the evaluation to hftrain search (") + kTrialReportFdVariable +
                         "=" + std::to_string(fd_) + "): " + errno_text());
}

std::unique_ptr<TrainerCallback> trial_report_from_environment() {
  const char* value = std::getenv(kTrialReportFdVariable);
  if (!value || !*value) return nullptr;
  char* end = nullptr;
  const long fd = std::strtol(value, &end, 10);
  if (*end != '\0' || fd < 0 || fd > 1 << 20 || ::fcntl(static_cast<int>(fd), F_GETFD) < 0)
    throw ConfigError(std::string(kTrialReportFdVariable) + "='" + value +
                      "' is not an open file descriptor (set by hftrain search for its trials only)");
  return std::make_unique<TrialReportCallback>(static_cast<int>(fd));
}

}  // namespace hftrain
