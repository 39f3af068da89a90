// save_total_limit rotation as a table. Expected rows are worked out by hand from HF Trainer's
// _sorted_checkpoints / _rotate_checkpoints rules (best bubbled to len-2; limit 1 with a best that is
// not the newest keeps 2; limit 1 at train end keeps only the best), plus hftrain's protections
// (numeric order, checkpoints above the current step untouched, the resumed-from checkpoint kept).
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "checkpoint/checkpoint_finder.h"
#include "checkpoint/rotation.h"

using namespace hftrain;
namespace fs = std::filesystem;

namespace {

struct Row {
  const char* name;
  std::vector<int64_t> present;
  int64_t limit;
  std::optional<int64_t> best;
  std::optional<int64_t> resumed_from;
  int64_t current;
  std::vector<int64_t> deleted;
};

RotationRequest request(const Row& row) {
  RotationRequest r;
  r.checkpoints = row.present;
  r.limit = row.limit;
  r.best = row.best;
  r.resumed_from = row.resumed_from;
  r.current = row.current;
  return r;
}

}  // namespace

TEST_CASE("rotation after a save follows HF's rules and never deletes what is needed", "[unit][checkpoint]") {
  const std::vector<Row> rows = {
      {"no limit keeps everything", {10, 20, 30}, 0, std::nullopt, std::nullopt, 30, {}},
      {"oldest go first", {10, 20, 30, 40}, 2, std::nullopt, std::nullopt, 40, {10, 20}},
      {"under the limit", {10, 20}, 3, std::nullopt, std::nullopt, 20, {}},
      // #27138: a string sort puts checkpoint-10000 before checkpoint-9000; numeric order does not.
      {"numeric, not lexicographic, order", {9000, 9900, 10000}, 2, std::nullopt, std::nullopt, 10000, {9000}},
      // #11769: the best used to be swapped with the newest, so the newest was deleted. Bubbled to
      // len-2 instead: with best=20 of 10..50 and limit 3, order becomes 10,30,40,20,50 -> delete 10,30.
      {"#11769 best is bubbled, newest kept", {10, 20, 30, 40, 50}, 3, 20, std::nullopt, 50, {10, 30}},
      // #15089: limit 2, the best is older than the previous one: it survives, the other old one goes.
      {"#15089 best survives limit 2", {10, 20, 30}, 2, 10, std::nullopt, 30, {20}},
      // #19300: limit 1 and the best is not the newest -> 2 kept during training "to allow resuming".
      {"#19300 limit 1 keeps best + newest", {10, 20, 30}, 1, 10, std::nullopt, 30, {20}},
      {"limit 1, best is the newest", {10, 20, 30}, 1, 30, std::nullopt, 30, {10, 20}},
      {"best unknown to the directory is ignored", {10, 20, 30}, 1, 5, std::nullopt, 30, {10, 20}},
      // #35070 / #25129 concern the end of training; during training the newest is never deleted.
      {"#35070 the newest is never deleted", {10, 20}, 1, 10, std::nullopt, 20, {}},
      {"resumed-from checkpoint is kept", {10, 20, 30}, 1, std::nullopt, 10, 30, {20}},
      {"resumed-from kept even with best", {10, 20, 30, 40}, 2, 20, 10, 40, {30}},
      // Higher-numbered checkpoints from another run (or an abandoned future after resuming from an
      // earlier step) are neither counted nor deleted; the checkpoint just saved is kept.
      {"stale higher checkpoints untouched", {10, 20, 1000}, 1, std::nullopt, std::nullopt, 20, {10}},
      {"resumed from earlier step, branch kept", {10, 20, 30, 40, 50}, 2, std::nullopt, 10, 20, {}},
  };
  for (const auto& row : rows) {
    INFO(row.name);
    CHECK(checkpoints_to_rotate(request(row)) == row.deleted);
  }
}

TEST_CASE("end-of-training cleanup with save_total_limit 1 keeps only the best", "[unit][checkpoint]") {
  const std::vector<Row> rows = {
      // #19300's expectation and HF's end of train(): only the best remains.
      {"#19300 limit 1 at the end keeps only the best", {10, 30}, 1, 10, std::nullopt, 30, {30}},
      {"#35070 best is the newest", {30}, 1, 30, std::nullopt, 30, {}},
      // #25129: the cleanup deleted every checkpoint. Without the best on disk nothing is removed.
      {"#25129 never deletes everything", {10, 30}, 1, 20, std::nullopt, 30, {}},
      {"no best tracked: nothing", {10, 30}, 1, std::nullopt, std::nullopt, 30, {}},
      {"other limits: nothing", {10, 20, 30}, 2, 10, std::nullopt, 30, {}},
      {"resumed-from survives the end", {10, 20, 30}, 1, 30, 10, 30, {20}},
      {"stale higher checkpoints untouched", {10, 30, 1000}, 1, 10, std::nullopt, 30, {30}},
  };
  for (const auto& row : rows) {
    INFO(row.name);
    CHECK(checkpoints_to_remove_at_train_end(request(row)) == row.deleted);
  }
}

TEST_CASE("apply_rotation deletes exactly the named checkpoints", "[unit][checkpoint]") {
  const fs::path dir = fs::temp_directory_path() / ("hftrain_unit_rotation_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  for (int s : {2, 4, 6}) {
    fs::create_directories(dir / ("checkpoint-" + std::to_string(s)));
    std::ofstream(dir / ("checkpoint-" + std::to_string(s)) / "f") << s;
  }
  apply_rotation(dir.string(), {2, 6});
  std::vector<int64_t> left;
  for (const auto& c : list_checkpoints(dir.string())) left.push_back(c.step);
  CHECK(left == std::vector<int64_t>{4});
  CHECK(!fs::exists(dir / ".checkpoint-2.deleting"));
  fs::remove_all(dir);
}
