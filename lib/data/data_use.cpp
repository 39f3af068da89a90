// Which data files a command reads (see DataUse in dataset.h).
#include <filesystem>

#include "data/dataset.h"
#include "data/data_files.h"
#include "log/logger.h"
#include "util/error.h"

namespace hftrain {

bool read_data_file(const std::string& path, bool needed, const std::string& key) {
  std::error_code ec;
  if (data_files_exist(path)) return true;
  if (needed)
    throw ConfigError(key + ": '" + path + "' does not exist (paths are relative to the working directory, " +
                      std::filesystem::current_path(ec).string() + ")");
  log_info(key + ": '" + path + "' does not exist; this command reads no split of it, so it is skipped");
  return false;
}

}  // namespace hftrain
