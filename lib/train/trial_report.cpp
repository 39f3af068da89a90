// Writes each evaluation of a search trial to the descriptor `hftrain search` gave it (see trial_report.h).
#include "train/trial_report.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "util/error.h"

namespace hftrain {

void TrialReportCallback::on_evaluate(const TrainerState& s, TrainerControl&, const nlohmann::json& metrics) {
  const std::string line = nlohmann::json{{"step", s.global_step}, {"epoch", s.epoch}, {"metrics", metrics}}.dump() + "\n";
  std::size_t done = 0;
  while (done < line.size()) {  // one line, whole: the reader may act on it at once
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw RuntimeFailure(std::string("search trial: cannot report the evaluation to hftrain search (") + kTrialReportFdVariable +
                           "=" + std::to_string(fd_) + "): " + std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
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
