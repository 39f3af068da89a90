// Resuming across batch layouts: the plan arithmetic (hand-worked cases, including the ones of a 2-worker
// run resumed on 1 worker), the sampler skip counted in samples (every example of an epoch read exactly
// once, whatever layouts read it, checked by simulating the training loop over a counting dataset), the
// list of changed settings, and overwrite_output_dir moving the previous run aside.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "checkpoint/previous_run.h"
#include "data/loader.h"
#include "runspec/sections.h"
#include "train/resume_changes.h"
#include "train/resume_plan.h"
#include "train/saved_run.h"

using namespace hftrain;
namespace fs = std::filesystem;

namespace {

class ResumeCountingDataset : public Dataset {
 public:
  explicit ResumeCountingDataset(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  Example get(int64_t index) const override {
    Example e;
    e.features = {static_cast<float>(index)};
    e.label = 0;
    return e;
  }

 private:
  int64_t n_;
};

TrainingArgs args_of(int64_t batch, int64_t ga, int64_t max_steps, double epochs = 3.0) {
  TrainingArgs a;
  a.per_device_train_batch_size = batch;
  a.gradient_accumulation_steps = ga;
  a.max_steps = max_steps;
  a.num_train_epochs = epochs;
  return a;
}

struct Layout {
  int64_t world, batch, ga;
};

// What the trainer's loop does with a plan, over every rank's loader: returns the step reached and the
// position it stops at; `seen[epoch][example]` counts the reads. `stop_at` = the step to stop after
// (a checkpoint), or the plan's max_steps.
struct Simulation {
  int64_t step = 0;
  DataPosition at;
  std::map<int64_t, std::map<int64_t, int>> seen;
};

void simulate(const std::shared_ptr<Dataset>& data, const Layout& l, const ResumePlan& start, int64_t stop_at, Simulation& sim) {
  std::vector<DataLoader> loaders;
  for (int64_t r = 0; r < l.world; ++r) loaders.emplace_back(data, TaskKind::kClassification, l.batch, true, 5, false, l.world, r);
  const TrainingPlan& plan = start.plan;
  for (int64_t epoch = start.epoch; epoch < plan.num_epochs && sim.step < stop_at; ++epoch) {
    const EpochSpan span = epoch == start.epoch ? start.first : EpochSpan{0, plan.batches_per_epoch, 0};
    for (auto& loader : loaders) loader.start_epoch(epoch, span.skip_samples);
    int64_t read = 0;
    const int64_t seen_before = sim.at.samples_seen;
    for (int64_t w = 0; w < windows_for(span.batches, l.ga) && sim.step < stop_at; ++w) {
      for (int64_t m = 0; m < window_size_for(span.batches, w, l.ga); ++m, ++read)
        for (auto& loader : loaders) {
          Batch b;
          REQUIRE(loader.next(b));
          for (int64_t i = 0; i < b.features.size(0); ++i) sim.seen[epoch][static_cast<int64_t>(b.features[i][0].item<float>())]++;
        }
      ++sim.step;
      sim.at.epoch = epoch;
      sim.at.samples_consumed = loaders[0].samples_consumed_after(span.skip_samples, read);
      sim.at.samples_seen = seen_before + sim.at.samples_consumed - span.skip_samples;
    }
    if (read == span.batches)
      for (auto& loader : loaders) {
        Batch b;
        CHECK_FALSE(loader.next(b));  // the span was the whole rest of the epoch
      }
  }
}

ResumePlan plan_for(const std::shared_ptr<Dataset>& data, const Layout& l, const TrainingArgs& args) {
  DataLoader probe(data, TaskKind::kClassification, l.batch, true, 5, false, l.world, 0);
  return fresh_start(make_training_plan(args, probe.batches_per_epoch(), l.world));
}

ResumePlan resume_for(const std::shared_ptr<Dataset>& data, const Layout& l, const TrainingArgs& args, const Simulation& sim) {
  DataLoader probe(data, TaskKind::kClassification, l.batch, true, 5, false, l.world, 0);
  const TrainingPlan plan = make_training_plan(args, probe.batches_per_epoch(), l.world);
  return make_resume_plan(args, plan, sim.step, sim.at, probe.batches_after(sim.at.samples_consumed), probe.samples_per_batch());
}

}  // namespace

TEST_CASE("the issue's 2-worker checkpoint resumed on 1 worker: the rest of the epoch, to max_steps", "[unit][resume]") {
  // 2000 examples, 2 workers x 4: global batch 8, 250 steps per epoch; checkpoint at step 120 = 960 samples.
  TrainingArgs args = args_of(4, 1, 200);
  const TrainingPlan one = make_training_plan(args, /*batches_per_epoch=*/500, /*world_size=*/1);
  const ResumePlan r = make_resume_plan(args, one, 120, DataPosition{0, 960, 960}, /*rest_batches=*/(2000 - 960) / 4, 4);
  CHECK_FALSE(r.done);
  CHECK(r.epoch == 0);
  CHECK(r.first.skip_samples == 960);
  CHECK(r.first.batches == 260);
  CHECK(r.first.first_batch == 240);
  CHECK(r.plan.max_steps == 200);
  CHECK(r.plan.num_epochs == 1);  // 80 steps fit in the 260 batches left

  // The small-dataset case: 300 examples; 2 x 4 reads 38 batches per epoch (the last has 2 per worker), so
  // step 120 is epoch 3 after 6 steps = 48 samples. One worker x 4: 63 batches left there, then 75 per epoch.
  const TrainingPlan small = make_training_plan(args, 75, 1);
  const ResumePlan s = make_resume_plan(args, small, 120, DataPosition{3, 48, 3 * 300 + 48}, 63, 4);
  CHECK_FALSE(s.done);
  CHECK(s.epoch == 3);
  CHECK(s.first.batches == 63);
  CHECK(s.plan.max_steps == 200);
  CHECK(s.plan.num_epochs == 5);  // 63 steps in epoch 3, 17 in epoch 4
}

TEST_CASE("resume plan: epochs, a finished epoch, nothing left, ignore_data_skip, warmup", "[unit][resume]") {
  TrainingArgs args = args_of(2, 2, -1, 2.5);
  args.warmup_ratio = 0.1;
  // 10 batches per epoch, accumulation 2: 5 steps per epoch; 2.5 epochs = ceil(12.5) = 13 steps.
  const TrainingPlan plan = make_training_plan(args, 10, 1);
  REQUIRE(plan.max_steps == 13);
  // Same layout at step 7 (epoch 1, 4 batches = 8 samples of 20 read): 13 - 7 steps left.
  ResumePlan r = make_resume_plan(args, plan, 7, DataPosition{1, 8, 28}, 6, 2);
  CHECK(r.plan.max_steps == 13);
  CHECK(r.first.batches == 6);
  CHECK(r.plan.num_epochs == 3);
  CHECK(r.plan.warmup_steps == 2);  // ceil(0.1 x 13)
  // A 2-worker run saved at step 3 after 12 samples of epoch 0 (global batch 8): this layout has 4 batches
  // (2 steps) left in epoch 0, then 5 steps in epoch 1 and 3 in the half epoch: ends at 3 + 10 = 13.
  r = make_resume_plan(args, plan, 3, DataPosition{0, 12, 12}, 4, 2);
  CHECK(r.plan.max_steps == 13);
  // ... saved at step 4 after 16 samples: 2 batches (1 step) left, so the run ends at 4 + 1 + 5 + 3 = 13.
  r = make_resume_plan(args, plan, 4, DataPosition{0, 16, 16}, 2, 2);
  CHECK(r.plan.max_steps == 13);
  // A 4-worker run (global batch 16) saved at step 1 after 16 samples: 2 batches left here -> 1 + 1 + 8 = 10.
  r = make_resume_plan(args, plan, 1, DataPosition{0, 16, 16}, 2, 2);
  CHECK(r.plan.max_steps == 10);
  CHECK(r.plan.warmup_steps == 1);
  // The epoch was read to its end: the next one starts from its beginning.
  r = make_resume_plan(args, plan, 5, DataPosition{0, 20, 20}, 0, 2);
  CHECK(r.epoch == 1);
  CHECK(r.first.skip_samples == 0);
  CHECK(r.first.batches == 10);
  CHECK(r.plan.max_steps == 13);
  // Past the end: nothing to train, the loop does not start.
  r = make_resume_plan(args, plan, 13, DataPosition{2, 10, 50}, 5, 2);
  CHECK(r.done);
  CHECK(r.epoch >= r.plan.num_epochs);
  // ignore_data_skip (HF): the interrupted epoch from its start.
  args.ignore_data_skip = true;
  r = make_resume_plan(args, plan, 7, DataPosition{1, 8, 28}, 6, 2);
  CHECK(r.epoch == 1);
  CHECK(r.first.skip_samples == 0);
  CHECK(r.first.batches == 10);
  // max_steps below the checkpoint's step.
  TrainingArgs capped = args_of(2, 2, 5);
  CHECK(make_resume_plan(capped, make_training_plan(capped, 10, 1), 7, DataPosition{1, 8, 28}, 6, 2).done);
}

TEST_CASE("resumed on any layout, every example of an epoch is read once and the run ends at max_steps", "[unit][resume]") {
  // 50 examples (not a multiple of any global batch here): saved after 9 steps, resumed on other layouts.
  auto data = std::make_shared<ResumeCountingDataset>(50);
  const int64_t max_steps = 23;
  for (const auto& [saving, resuming] : std::vector<std::pair<Layout, Layout>>{
           {{2, 3, 1}, {1, 3, 1}}, {{2, 3, 1}, {1, 6, 1}}, {{1, 4, 2}, {2, 4, 2}}, {{1, 6, 2}, {3, 2, 2}},
           {{2, 2, 2}, {3, 2, 1}}, {{2, 3, 1}, {3, 5, 2}}, {{3, 2, 1}, {2, 3, 1}}, {{2, 2, 1}, {3, 1, 1}}}) {
    INFO("saved " << saving.world << "x" << saving.batch << "x" << saving.ga << ", resumed " << resuming.world << "x"
                  << resuming.batch << "x" << resuming.ga);
    Simulation whole;
    simulate(data, saving, plan_for(data, saving, args_of(saving.batch, saving.ga, max_steps)), max_steps, whole);
    Simulation sim;
    simulate(data, saving, plan_for(data, saving, args_of(saving.batch, saving.ga, max_steps)), 9, sim);
    REQUIRE(sim.step == 9);
    const DataPosition at_checkpoint = sim.at;
    const ResumePlan r = resume_for(data, resuming, args_of(resuming.batch, resuming.ga, max_steps), sim);
    REQUIRE_FALSE(r.done);
    simulate(data, resuming, r, r.plan.max_steps, sim);
    CHECK(sim.step == max_steps);
    // Every epoch the runs finished: each example read exactly once, padding repeats aside (a worker's
    // shard is padded with the epoch's first examples, at most world - 1 of them).
    for (const auto& [epoch, counts] : sim.seen) {
      if (epoch >= sim.at.epoch) continue;
      INFO("epoch " << epoch);
      CHECK(counts.size() == 50u);
      int extra = 0;
      for (const auto& kv : counts) extra += kv.second - 1;
      CHECK(extra <= 2 * 2);  // two layouts read the epoch, each padding at most world - 1 <= 2
    }
    // The interrupted epoch: no example read twice before the end of its order.
    for (const auto& kv : sim.seen[sim.at.epoch]) CHECK(kv.second <= 2);
    // samples_seen counts exactly the reads (padding repeats included).
    int64_t reads = 0;
    for (const auto& [epoch, counts] : sim.seen)
      for (const auto& kv : counts) reads += kv.second;
    CHECK(sim.at.samples_seen == reads);
    // With the global batch kept, as many samples as the uninterrupted run, within one global batch; with
    // another, the steps left x the new global batch, less the short batches at the ends of epochs.
    const int64_t g_saved = saving.world * saving.batch * saving.ga, g_new = resuming.world * resuming.batch * resuming.ga;
    if (g_saved == g_new) {
      CHECK(std::abs(sim.at.samples_seen - whole.at.samples_seen) <= g_new);
    } else {
      const int64_t after = sim.at.samples_seen - at_checkpoint.samples_seen, epochs = sim.at.epoch - at_checkpoint.epoch + 1;
      CHECK(after <= (max_steps - 9) * g_new);
      CHECK(after >= (max_steps - 9) * g_new - epochs * g_new);
    }
  }
}

TEST_CASE("a skip that is a whole number of the same layout's batches continues each worker's shard exactly", "[unit][resume]") {
  std::vector<int64_t> order(23);
  for (int64_t i = 0; i < 23; ++i) order[static_cast<std::size_t>(i)] = (i * 7) % 23;
  for (int64_t world : {1, 2, 3}) {
    for (int64_t rank = 0; rank < world; ++rank) {
      const auto full = distributed_shard(order, world, rank, false);
      const auto rest = distributed_shard(order, world, rank, false, /*skip=*/world * 4);
      REQUIRE(rest.size() + 4 == full.size());
      CHECK(std::equal(rest.begin(), rest.end(), full.begin() + 4));
    }
  }
  // Any skip: the ranks together read the rest of the order exactly (padded from the order's start).
  std::map<int64_t, int> seen;
  for (int64_t rank = 0; rank < 3; ++rank)
    for (auto i : distributed_shard(order, 3, rank, false, /*skip=*/5)) seen[i]++;
  for (std::size_t k = 5; k < order.size(); ++k) CHECK(seen[order[k]] == 1);
  CHECK(seen[order[0]] == 0);  // 18 left: a multiple of 3, no padding
}

TEST_CASE("the changes against a checkpoint list differing options and derived figures", "[unit][resume]") {
  const std::string saved = "training: {learning_rate: 0.0010000000000000000208, max_steps: 130, output_dir: a, resume_from_checkpoint: ''}\n"
                            "scheduler: {type: linear}\nzero: {stage: 0}\ndistributed: {nproc_per_node: 2}\n";
  const std::string now = "training: {learning_rate: 0.0005, max_steps: 200, output_dir: a, resume_from_checkpoint: last}\n"
                          "scheduler: {type: cosine}\nzero: {stage: 2}\ndistributed: {nproc_per_node: 1}\n";
  const auto changes = spec_changes(saved, now);
  std::map<std::string, std::pair<std::string, std::string>> by_name;
  for (const auto& c : changes) by_name[c.name] = {c.saved, c.now};
  CHECK(by_name.size() == 4);
  CHECK(by_name["training.learning_rate"] == std::make_pair(std::string("0.001"), std::string("0.0005")));
  CHECK(by_name["training.max_steps"] == std::make_pair(std::string("130"), std::string("200")));
  CHECK(by_name["scheduler.type"] == std::make_pair(std::string("linear"), std::string("cosine")));
  CHECK(by_name["zero.stage"] == std::make_pair(std::string("0"), std::string("2")));
  const auto layout = layout_changes(LayoutFigures{2, 128, 130}, LayoutFigures{1, 64, 200});
  REQUIRE(layout.size() == 3);
  CHECK(layout[0].name == "world size");
  const std::string block = describe_resume_changes("out/checkpoint-120", layout);
  CHECK_THAT(block, Catch::Contains("3 changes") && Catch::Contains("global batch size: 128 -> 64") &&
                        Catch::Contains("max_steps (the step the run ends at): 130 -> 200"));
  CHECK_THAT(describe_resume_changes("c", {}), Catch::Contains("the same settings"));
  CHECK_THROWS(spec_changes("a: [", now));
}

TEST_CASE("overwrite_output_dir moves the previous run's checkpoints and model aside, nothing else", "[unit][resume]") {
  const fs::path dir = fs::temp_directory_path() / ("hftrain_ut_previous_run_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "checkpoint-10");
  fs::create_directories(dir / ".checkpoint-12.partial");
  fs::create_directories(dir / "runs");
  for (const char* f : {"model.safetensors", "config.json", "trainer_state.json", "train_results.json", "spec.yaml", "notes.txt"})
    std::ofstream(dir / f) << "x";
  const std::string moved = move_previous_run_aside(dir.string());
  CHECK(moved == (dir / "previous_run-1").string());
  for (const char* f : {"checkpoint-10", ".checkpoint-12.partial", "model.safetensors", "config.json", "trainer_state.json",
                        "train_results.json"}) {
    INFO(f);
    CHECK(fs::exists(dir / "previous_run-1" / f));
    CHECK_FALSE(fs::exists(dir / f));
  }
  for (const char* f : {"runs", "spec.yaml", "notes.txt"}) CHECK(fs::exists(dir / f));
  CHECK(move_previous_run_aside(dir.string()).empty());  // nothing of a run left to move
  std::ofstream(dir / "trainer_state.json") << "x";
  CHECK(move_previous_run_aside(dir.string()) == (dir / "previous_run-2").string());
  fs::remove_all(dir);
}

TEST_CASE("the older-weights check compares the run's last step with output_dir's model", "[unit][resume]") {
  const fs::path dir = fs::temp_directory_path() / ("hftrain_ut_older_weights_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  CHECK(older_weights_problem(dir.string(), "ckpt", 5).empty());  // no model there yet
  std::ofstream(dir / "trainer_state.json") << R"({"global_step": 130, "log_history": []})";
  CHECK(older_weights_problem(dir.string(), "ckpt", 130).empty());
  CHECK(older_weights_problem(dir.string(), "ckpt", 200).empty());
  const std::string problem = older_weights_problem(dir.string(), "out/checkpoint-120", 120);
  CHECK_THAT(problem, Catch::Contains("out/checkpoint-120") && Catch::Contains("step 130") &&
                          Catch::Contains("training.resume_over_newer_model=true"));
  fs::remove_all(dir);
}
