// train/loss_tally: the logged loss sums as HF Trainer forms them (tr_loss per micro-batch, logging_nan_inf_filter's
// stand-in for a non-finite loss: tr_loss / (1 + global_step - globalstep_last_logged), tr_loss including the step's
// earlier micro-batches), here against those formulas written out in host doubles; the sums stay on the losses'
// device until read.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "train/loss_tally.h"

namespace {

using hftrain::LossTally;

// HF's accumulation, in host doubles: each step is a list of micro-batch losses; returns tr_loss after the steps
// (no log in between) and checks `tally` against it after each step.
double tally_steps_like_hf(LossTally& tally, const std::vector<std::vector<float>>& steps, bool filter) {
  double logged = 0;  // tr_loss since the last log, before the current step
  int64_t steps_since_log = 0;
  for (const auto& step : steps) {
    double step_sum = 0;
    for (const float loss : step) {
      double added = loss;
      if (filter && !std::isfinite(added)) added = (logged + step_sum) / static_cast<double>(1 + steps_since_log);
      step_sum += added;
      tally.add_micro_batch(torch::scalar_tensor(loss, torch::kFloat), steps_since_log);
    }
    logged += step_sum;
    tally.end_step();
    ++steps_since_log;
    const double got = tally.since_log();
    if (std::isnan(logged)) CHECK(std::isnan(got));
    else CHECK(got == logged);
  }
  return logged;
}

}  // namespace

TEST_CASE("loss tally: finite losses sum in float64 per micro-batch and step, as the host would", "[unit][train]") {
  LossTally tally;
  const double since_log = tally_steps_like_hf(tally, {{0.1f, 0.2f, 0.3f}, {1.25f}, {2.5f, 1e-7f}}, true);
  CHECK(tally.total() == since_log);
  tally.clear_since_log();
  CHECK(tally.since_log() == 0.0);
  tally.add_micro_batch(torch::scalar_tensor(0.5f), 0);
  tally.end_step();
  CHECK(tally.since_log() == 0.5);
  CHECK(tally.total() == since_log + 0.5);
}

TEST_CASE("loss tally: logging_nan_inf_filter stands in HF's mean for a non-finite loss, this step's earlier "
          "micro-batches included, and off sums the NaN",
          "[unit][train]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<std::vector<float>> steps = {{1.0f, 3.0f}, {2.0f, nan}, {inf, 0.5f}, {-inf}};
  LossTally filtered(true);
  const double expected = tally_steps_like_hf(filtered, steps, true);
  CHECK(std::isfinite(expected));
  // Step 2's NaN stands in (4 + 2) / 2 = 3: the earlier step and this step's first micro-batch, over 2 steps.
  CHECK(expected == Approx(4.0 + (2.0 + 3.0) + (9.0 / 3.0 + 0.5) + (12.5 / 4.0)).epsilon(1e-15));
  LossTally unfiltered(false);
  tally_steps_like_hf(unfiltered, steps, false);
  CHECK(std::isnan(unfiltered.since_log()));
}

TEST_CASE("loss tally: a checkpoint's sums restored go on from there, on the next loss's device", "[unit][train]") {
  LossTally tally;
  tally.restore(1.5, 7.25);
  CHECK(tally.since_log() == 1.5);
  CHECK(tally.total() == 7.25);
  tally.add_micro_batch(torch::scalar_tensor(0.25, torch::kDouble), 2);
  tally.end_step();
  CHECK(tally.since_log() == 1.75);
  CHECK(tally.total() == 7.5);
  LossTally fresh;
  CHECK(fresh.since_log() == 0.0);
  CHECK(fresh.total() == 0.0);
  fresh.end_step();  // no loss yet: nothing to add
  CHECK(fresh.total() == 0.0);
}

#if HFTRAIN_WITH_CUDA
TEST_CASE("loss tally on a GPU: the sums stay on the device and equal the host's", "[gpu][train]") {
  REQUIRE(torch::cuda::is_available());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  LossTally host(true), device(true);
  for (const auto& step : std::vector<std::vector<float>>{{0.3f, 0.7f}, {nan, 1.1f}, {0.01f}}) {
    for (const float loss : step) {
      host.add_micro_batch(torch::scalar_tensor(loss), 1);
      device.add_micro_batch(torch::scalar_tensor(loss).cuda(), 1);
    }
    host.end_step();
    device.end_step();
  }
  CHECK(device.since_log() == host.since_log());
  CHECK(device.total() == host.total());
  LossTally resumed(true);  // a checkpoint's sums (host numbers), then losses on the GPU
  resumed.restore(2.5, 10.0);
  resumed.add_micro_batch(torch::scalar_tensor(0.5f).cuda(), 1);
  resumed.end_step();
  CHECK(resumed.since_log() == 3.0);
  CHECK(resumed.total() == 10.5);
}
#endif
