// Checkpoint rotation (see rotation.h). HF source: trainer.py _sorted_checkpoints, _rotate_checkpoints
// and the end of train() (hf-deepspeed-facts 1.5).
#include "checkpoint/rotation.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "checkpoint/checkpoint_files.h"
#include "util/fault_injection.h"
#include "util/error.h"

namespace hftrain {
namespace fs = std::filesystem;

namespace {

// The checkpoints that take part: present, at most `current`, ascending, without duplicates.
std::vector<int64_t> candidates(const RotationRequest& r) {
  std::vector<int64_t> c;
  for (int64_t s : r.checkpoints)
    if (s <= r.current) c.push_back(s);
  std::sort(c.begin(), c.end());
  c.erase(std::unique(c.begin(), c.end()), c.end());
  return c;
}

bool contains(const std::vector<int64_t>& v, std::optional<int64_t> s) {
  return s && std::find(v.begin(), v.end(), *s) != v.end();
}

std::vector<int64_t> without_protected(std::vector<int64_t> steps, const RotationRequest& r) {
  steps.erase(std::remove_if(steps.begin(), steps.end(),
                             [&](int64_t s) { return s == r.current || (r.resumed_from && s == *r.resumed_from); }),
              steps.end());
  std::sort(steps.begin(), steps.end());
  return steps;
}

}  // namespace

std::vector<int64_t> checkpoints_to_rotate(const RotationRequest& r) {
  if (r.limit <= 0) return {};
  std::vector<int64_t> sorted = candidates(r);
  const bool has_best = contains(sorted, r.best);
  if (has_best) {
    // Bubble the best up to index len-2 (HF: for i in range(best_idx, len-2): swap(i, i+1)).
    const auto best_idx = static_cast<std::size_t>(std::find(sorted.begin(), sorted.end(), *r.best) - sorted.begin());
    for (std::size_t i = best_idx; i + 2 < sorted.size(); ++i) std::swap(sorted[i], sorted[i + 1]);
  }
  if (static_cast<int64_t>(sorted.size()) <= r.limit) return {};
  int64_t limit = r.limit;
  if (limit == 1 && has_best && sorted.back() != *r.best) limit = 2;  // "to allow resuming"
  const int64_t n_delete = std::max<int64_t>(0, static_cast<int64_t>(sorted.size()) - limit);
  return without_protected(std::vector<int64_t>(sorted.begin(), sorted.begin() + n_delete), r);
}

std::vector<int64_t> checkpoints_to_remove_at_train_end(const RotationRequest& r) {
  if (r.limit != 1) return {};
  std::vector<int64_t> present = candidates(r);
  if (!contains(present, r.best)) return {};
  std::vector<int64_t> out;
  for (int64_t s : present)
    if (s != *r.best && !(r.resumed_from && s == *r.resumed_from)) out.push_back(s);
  return out;
}

void apply_rotation(const std::string& output_dir, const std::vector<int64_t>& steps) {
  for (int64_t step : steps) {
    const fs::path dir = fs::path(output_dir) / ckpt::checkpoint_dir_name(step);
    const fs::path hidden = fs::path(output_dir) / ckpt::deleting_dir_name(step);
    std::cerr << "save_total_limit: deleting " << dir.string() << std::endl;
    if (int err = fault::write_step("hide " + ckpt::checkpoint_dir_name(step) + " for deletion"))
      throw RuntimeFailure("cannot delete '" + dir.string() + "': " + std::strerror(err));
    std::error_code ec;
    fs::remove_all(hidden, ec);
    if (std::rename(dir.c_str(), hidden.c_str()) != 0) {
      std::cerr << "warning: could not delete '" << dir.string() << "': " << std::strerror(errno) << std::endl;
      continue;
    }
    if (int err = fault::write_step("remove " + ckpt::deleting_dir_name(step)))
      throw RuntimeFailure("cannot delete '" + hidden.string() + "': " + std::strerror(err));
    fs::remove_all(hidden, ec);
  }
}

}  // namespace hftrain
