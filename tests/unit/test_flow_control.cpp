// FlowControl: the exact steps at which log / evaluate / save / stop happen (HF DefaultFlowCallback).
#include <catch2/catch.hpp>

#include "runspec/sections.h"
#include "train/flow_control.h"

using namespace hftrain;

namespace {

struct Seen {
  std::vector<int64_t> log, eval, save, stop;
};

Seen run(const TrainingArgs& args, int64_t max_steps) {
  FlowControl flow(args, max_steps);
  Seen s;
  for (int64_t g = 1; g <= max_steps; ++g) {
    auto d = flow.on_step_end(g);
    if (d.should_log) s.log.push_back(g);
    if (d.should_evaluate) s.eval.push_back(g);
    if (d.should_save) s.save.push_back(g);
    if (d.should_training_stop) s.stop.push_back(g);
  }
  return s;
}

using V = std::vector<int64_t>;

}  // namespace

TEST_CASE("steps strategies fire at multiples, the last step always saves", "[unit][flow]") {
  TrainingArgs a;
  a.logging_steps = 3;
  a.eval_strategy = "steps";
  a.eval_steps = 4;
  a.save_steps = 5;
  Seen s = run(a, 10);
  CHECK(s.log == V{3, 6, 9});
  CHECK(s.eval == V{4, 8});
  CHECK(s.save == V{5, 10});
  CHECK(s.stop == V{10});
}

TEST_CASE("ratios resolve to ceil(max_steps * ratio)", "[unit][flow]") {
  TrainingArgs a;
  a.logging_steps = 0.25;  // ceil(10 * 0.25) = 3
  a.save_strategy = "no";
  Seen s = run(a, 10);
  CHECK(s.log == V{3, 6, 9});
  CHECK(s.save.empty());
  CHECK(resolve_interval(0.1, 95) == 10);
}

TEST_CASE("eval_steps defaults to logging_steps, eval_delay postpones evaluation", "[unit][flow]") {
  TrainingArgs a;
  a.logging_steps = 2;
  a.eval_strategy = "steps";
  a.eval_delay = 5;
  a.save_strategy = "no";
  Seen s = run(a, 10);
  CHECK(s.eval == V{6, 8, 10});
}

TEST_CASE("logging_first_step logs step 1", "[unit][flow]") {
  TrainingArgs a;
  a.logging_steps = 5;
  a.logging_first_step = true;
  CHECK(run(a, 10).log == V{1, 5, 10});
}

TEST_CASE("epoch strategies fire at epoch end only", "[unit][flow]") {
  TrainingArgs a;
  a.logging_strategy = "epoch";
  a.eval_strategy = "epoch";
  a.save_strategy = "epoch";
  a.eval_delay = 2;
  Seen s = run(a, 10);
  CHECK(s.log.empty());
  CHECK(s.save.empty());  // stop at max_steps saves only under the steps strategy
  FlowControl flow(a, 10);
  auto e1 = flow.on_epoch_end(1.0);
  CHECK(e1.should_log);
  CHECK(e1.should_save);
  CHECK_FALSE(e1.should_evaluate);
  CHECK(flow.on_epoch_end(2.0).should_evaluate);
}
