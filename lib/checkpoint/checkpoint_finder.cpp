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

bool means_last(const std::string& resume_from) {
  const std::string key = lower(resume_from);
  return key == "true" || key == "last";
}

bool means_fresh(const std::string& resume_from) {
  const std::string key = lower(resume_from);
  return key.empty() || key == "false";
}

// "a, b/, c/ (and 7 more)": a directory's entries, sorted, directories marked with '/'.
std::string list_entries(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    names.push_back(entry.path().filename().string() + (entry.is_directory(ec) ? "/" : ""));
  if (names.empty()) return "nothing (empty directory)";
  std::sort(names.begin(), names.end());
  const std::size_t shown = std::min<std::size_t>(names.size(), 12);
  std::string out;
  for (std::size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > shown) out += " (and " + std::to_string(names.size() - shown) + " more)";
  return out;
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

std::string resume_setting_problem(const std::string& resume_from, const std::string& output_dir) {
  if (means_fresh(resume_from)) return "";
  if (means_last(resume_from)) {
    std::string skipped;
    if (!find_last_complete_checkpoint(output_dir, [&](const std::string& m) { skipped += "; " + m; }).empty()) return "";
    return "'" + resume_from + "': no valid checkpoint found in output directory '" + output_dir + "'" +
           (fs::exists(output_dir) ? skipped : " (it does not exist)");
  }
  std::error_code ec;
  if (!fs::exists(resume_from, ec)) return "'" + resume_from + "' does not exist";
  if (!fs::is_directory(resume_from, ec)) return "'" + resume_from + "' is a file, not a checkpoint directory";
  const std::string problem = resume_problem(resume_from);
  if (problem.empty()) return "";
  if (!fs::exists(fs::path(resume_from) / ckpt::kManifestFile, ec)) {
    // Not a checkpoint at all: say what is there, and point at a checkpoint inside (an output_dir given by mistake).
    std::string text = "'" + resume_from + "' holds no complete checkpoint (no " + ckpt::kManifestFile +
                       "); it contains: " + list_entries(resume_from);
    const std::string inner = find_last_complete_checkpoint(resume_from, [](const std::string&) {});
    if (!inner.empty()) text += "; its newest complete checkpoint is '" + inner + "'";
    return text;
  }
  return "cannot resume from '" + resume_from + "': " + problem;
}

std::string resolve_resume_checkpoint(const std::string& resume_from, const std::string& output_dir,
                                      const std::function<void(const std::string&)>& warn) {
  if (means_fresh(resume_from)) return "";
  if (means_last(resume_from)) {
    std::string dir = find_last_complete_checkpoint(output_dir, warn);
    if (dir.empty()) throw ConfigError("training.resume_from_checkpoint: " + resume_setting_problem(resume_from, output_dir));
    return dir;
  }
  const std::string problem = resume_setting_problem(resume_from, output_dir);
  if (!problem.empty()) throw ConfigError("training.resume_from_checkpoint: " + problem);
  return resume_from;
}

}  // namespace hftrain
