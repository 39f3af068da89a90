// Checkpoint discovery and resume resolution (see checkpoint_finder.h).
#include "checkpoint/checkpoint_finder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "checkpoint/checkpoint_files.h"
#include "checkpoint/manifest.h"
#include "util/error.h"

namespace hftrain {
namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::vector<CheckpointDir> list_checkpoints(const std::string& output_dir) {
  std::vector<CheckpointDir> out;
  std::error_code ec;
  if (!fs::is_directory(output_dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(output_dir, ec)) {
    auto step = ckpt::parse_checkpoint_dir_name(entry.path().filename().string());
    if (!step || !entry.is_directory(ec)) continue;
    out.push_back({*step, entry.path().string()});
  }
  std::sort(out.begin(), out.end(), [](const CheckpointDir& a, const CheckpointDir& b) { return a.step < b.step; });
  return out;
}

std::string resume_problem(const std::string& checkpoint_dir) {
  std::string problem = verify_checkpoint(checkpoint_dir);
  if (!problem.empty()) return problem;
  if (read_manifest(checkpoint_dir).save_only_model)
    return "'" + checkpoint_dir +
           "' was saved with save_only_model=true: it holds no optimizer, scheduler or RNG state to resume from "
           "(start a new run from its weights with model.from_pretrained instead)";
  return "";
}

std::string find_last_complete_checkpoint(const std::string& output_dir,
                                          const std::function<void(const std::string&)>& warn) {
  auto all = list_checkpoints(output_dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    const std::string problem = resume_problem(it->path);
    if (problem.empty()) return it->path;
    warn("skipping " + it->path + ": " + problem);
  }
  return "";
}

std::string resolve_resume_checkpoint(const std::string& resume_from, const std::string& output_dir,
                                      const std::function<void(const std::string&)>& warn) {
  const std::string key = lower(resume_from);
  if (key.empty() || key == "false") return "";
  if (key == "true" || key == "last") {
    std::string dir = find_last_complete_checkpoint(output_dir, warn);
    if (dir.empty())
      throw RuntimeFailure("training.resume_from_checkpoint=" + resume_from +
                           ": no valid checkpoint found in output directory '" + output_dir + "'");
    return dir;
  }
  std::error_code ec;
  if (!fs::is_directory(resume_from, ec))
    throw RuntimeFailure("training.resume_from_checkpoint: '" + resume_from + "' is not a checkpoint directory");
  const std::string problem = resume_problem(resume_from);
  if (!problem.empty()) throw RuntimeFailure("cannot resume from '" + resume_from + "': " + problem);
  return resume_from;
}

}  // namespace hftrain
