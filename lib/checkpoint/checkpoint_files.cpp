// Checkpoint file and directory names (see checkpoint_files.h).
#include "checkpoint/checkpoint_files.h"

#include <cctype>
#include <limits>

#include "util/strings.h"

namespace hftrain {
namespace ckpt {
namespace {

std::optional<int64_t> parse_digits(const std::string& s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

}  // namespace

std::string rng_state_file(int64_t rank, int64_t world_size) {
  return world_size <= 1 ? "rng_state.safetensors" : "rng_state_" + std::to_string(rank) + ".safetensors";
}

std::string checkpoint_dir_name(int64_t step) { return "checkpoint-" + std::to_string(step); }

std::optional<int64_t> parse_checkpoint_dir_name(const std::string& name) {
  static const std::string prefix = "checkpoint-";
  if (!starts_with(name, prefix)) return std::nullopt;
  return parse_digits(name.substr(prefix.size()));
}

std::string partial_dir_name(int64_t step) { return "." + checkpoint_dir_name(step) + ".partial"; }
std::string replaced_dir_name(int64_t step) { return "." + checkpoint_dir_name(step) + ".old"; }
std::string deleting_dir_name(int64_t step) { return "." + checkpoint_dir_name(step) + ".deleting"; }

bool is_stale_temporary(const std::string& name) {
  if (!starts_with(name, ".checkpoint-")) return false;
  for (const char* suffix : {".partial", ".old", ".deleting"}) {
    if (!ends_with(name, suffix)) continue;
    const std::string middle = name.substr(1, name.size() - 1 - std::char_traits<char>::length(suffix));
    return parse_checkpoint_dir_name(middle).has_value();
  }
  return false;
}

}  // namespace ckpt
}  // namespace hftrain
