// Process-wide logging through spdlog: level chosen per process as HF TrainingArguments does
// (log_level on the main process, log_level_replica elsewhere, "main" meaning local rank 0 when
// log_on_each_node, else global rank 0), lines written to stderr via the Console so they never tear
// the progress bar. Messages at info print bare; other levels get a "warning: " style prefix, and
// processes other than rank 0 a "[rank N] " prefix.
#pragma once

#include <cstdint>
#include <string>

namespace hftrain {

struct TrainingArgs;

// Who this process is. Single-process runs are rank 0 of 1; the data-parallel launcher sets the rest.
struct ProcessIdentity {
  int64_t rank = 0;
  int64_t local_rank = 0;
  int64_t world_size = 1;
};

// HF get_process_log_level: the level name ("debug", "info", "warning", "error", "critical") this
// process logs at. "passive" means hftrain's default, info.
std::string process_log_level(const std::string& log_level, const std::string& log_level_replica,
                              bool log_on_each_node, const ProcessIdentity& who);

// Installs the console logger at info for rank 0 (idempotent). Called before the spec is read.
void init_logging();
// Applies the spec's log_level / log_level_replica / log_on_each_node for process `who`.
void configure_logging(const TrainingArgs& args, const ProcessIdentity& who = {});

const ProcessIdentity& process_identity();
// HF is_world_process_zero: reporters (progress bar, metrics table, JSONL, TensorBoard) run here only.
bool is_world_process_zero();

void log_debug(const std::string& message);
void log_info(const std::string& message);
void log_warning(const std::string& message);
void log_error(const std::string& message);

}  // namespace hftrain
