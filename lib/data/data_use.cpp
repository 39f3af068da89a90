// Which data files a command reads (see DataUse in dataset.h).
#include <filesystem>

#include "data/dataset.h"
#include "log/logger.h"

namespace hftrain {

bool read_data_file(const std::string& path, bool needed, const std::string& key) {
  if (needed) return true;
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) return true;
  log_info(key + ": '" + path + "' does not exist; this command reads no split of it, so it is skipped");
  return false;
}

}  // namespace hftrain
