// Moving a previous run's results aside (see previous_run.h).
#include "checkpoint/previous_run.h"

#include <algorithm>
#include <filesystem>

#include "checkpoint/checkpoint_files.h"
#include "util/error.h"
#include "util/strings.h"

namespace hftrain {
namespace fs = std::filesystem;

bool belongs_to_previous_run(const std::string& name) {
  if (ckpt::parse_checkpoint_dir_name(name)) return true;
  if (starts_with(name, ".checkpoint-") && ends_with(name, ".partial")) return true;
  if (starts_with(name, "model") && ends_with(name, ".safetensors")) return true;
  static const char* const kFiles[] = {"model.safetensors.index.json", "config.json", "generation_config.json",
                                       "trainer_state.json"};
  if (std::find(std::begin(kFiles), std::end(kFiles), name) != std::end(kFiles)) return true;
  return ends_with(name, "_results.json");
}

std::string move_previous_run_aside(const std::string& output_dir) {
  std::error_code ec;
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(output_dir, ec))
    if (belongs_to_previous_run(e.path().filename().string())) entries.push_back(e.path());
  if (ec || entries.empty()) return "";
  std::sort(entries.begin(), entries.end());
  fs::path target;
  for (int k = 1;; ++k) {
    target = fs::path(output_dir) / ("previous_run-" + std::to_string(k));
    if (!fs::exists(target, ec)) break;
  }
  fs::create_directory(target, ec);
  if (ec) throw RuntimeFailure("cannot create '" + target.string() + "': " + ec.message());
  for (const auto& from : entries) {
    fs::rename(from, target / from.filename(), ec);
    if (ec)
      throw RuntimeFailure("overwrite_output_dir: cannot move '" + from.string() + "' to '" + target.string() + "': " +
                           ec.message());
  }
  return target.string();
}

}  // namespace hftrain
