// The loss scaler against DeepSpeed's DynamicLossScaler rules (deepspeed/runtime/fp16/loss_scaler.py,
// update_scale): scripted overflow / no-overflow sequences, the scale after every step worked out by
// hand from those rules (comments show the arithmetic), plus checkpoint state round trips.
#include <catch2/catch.hpp>

#include <vector>

#include "engine/loss_scaler.h"
#include "util/error.h"

using namespace hftrain;

namespace {

LossScalerConfig dynamic(int64_t power, int64_t window, int64_t hysteresis, double min_scale = 1.0,
                         bool consecutive = false) {
  LossScalerConfig c;
  c.dynamic = true;
  c.initial_scale_power = power;
  c.scale_window = window;
  c.hysteresis = hysteresis;
  c.min_scale = min_scale;
  c.consecutive_hysteresis = consecutive;
  return c;
}

// Drives `scaler` through `overflows` and returns the scale after each update.
std::vector<double> drive(LossScaler& scaler, const std::vector<bool>& overflows) {
  std::vector<double> scales;
  for (bool o : overflows) {
    scaler.update(o);
    scales.push_back(scaler.scale());
  }
  return scales;
}

}  // namespace

TEST_CASE("dynamic loss scale grows after scale_window overflow-free steps", "[unit][precision]") {
  LossScaler s(dynamic(4, 3, 1));  // 2^4 = 16, window 3
  CHECK(s.scale() == 16);
  // cur_iter 0: (0 - (-1)) % 3 = 1; iter 1: 2 % 3; iter 2: 3 % 3 == 0 -> 32; iter 3: 4; iter 4: 5;
  // iter 5: 6 % 3 == 0 -> 64.
  CHECK(drive(s, {false, false, false, false, false, false}) == std::vector<double>{16, 16, 32, 32, 32, 64});
  CHECK(s.iteration() == 6);
}

TEST_CASE("hysteresis delays the first halving and is refilled when the scale grows", "[unit][precision]") {
  LossScaler s(dynamic(10, 2, 2));  // 1024, window 2, hysteresis 2
  // iter 0 overflow: hysteresis 2 -> 1, scale unchanged, last_overflow = 0.
  // iter 1 overflow: hysteresis is 1 -> halve to 512, last_overflow = 1.
  // iter 2 ok: (2 - 1) % 2 = 1 -> 512.  iter 3 ok: (3 - 1) % 2 == 0 -> refill hysteresis to 2, 1024.
  // iter 4 overflow: hysteresis 2 -> 1, scale unchanged.  iter 5 overflow: halve to 512.
  // iter 6 overflow: hysteresis still 1 (not refilled without growth) -> 256.
  CHECK(drive(s, {true, true, false, false, true, true, true}) ==
        std::vector<double>{1024, 512, 512, 1024, 1024, 512, 256});
  CHECK(s.hysteresis_left() == 1);
}

TEST_CASE("consecutive_hysteresis refills the hysteresis after every overflow-free step", "[unit][precision]") {
  LossScaler s(dynamic(10, 100, 2, 1.0, /*consecutive=*/true));
  // iter 0 overflow: hysteresis 2 -> 1.  iter 1 ok: refilled to 2 (consecutive).  iter 2 overflow: 2 -> 1,
  // scale unchanged.  iter 3 overflow: hysteresis 1 -> halve to 512.
  CHECK(drive(s, {true, false, true, true}) == std::vector<double>{1024, 1024, 1024, 512});
  // Without consecutive_hysteresis the same sequence halves at iter 2 (hysteresis stays 1 after iter 0).
  LossScaler plain(dynamic(10, 100, 2));
  CHECK(drive(plain, {true, false, true, true}) == std::vector<double>{1024, 1024, 512, 256});
}

TEST_CASE("the dynamic scale never drops below min_loss_scale, and an overflow there ends the run", "[unit][precision]") {
  LossScaler s(dynamic(2, 1000, 1, /*min=*/2.0));  // 4, floor 2
  CHECK(drive(s, {true}) == std::vector<double>{2});  // max(4 / 2, 2)
  CHECK_THROWS_AS(s.update(true), RuntimeFailure);    // already at the minimum
  LossScalerConfig c = dynamic(2, 1000, 1, 3.0);      // floor 3: 4 / 2 = 2 is clamped to 3
  c.raise_error_at_min_scale = false;
  LossScaler t(c);
  CHECK(drive(t, {true, true, true}) == std::vector<double>{3, 3, 3});
}

TEST_CASE("a static loss scale never changes", "[unit][precision]") {
  LossScalerConfig c;
  c.static_scale = 128;
  LossScaler s(c);
  CHECK_FALSE(s.dynamic());
  CHECK(drive(s, {true, false, true, true, false}) == std::vector<double>{128, 128, 128, 128, 128});
  LossScaler one;  // bf16 / fp32: scale 1
  CHECK(one.scale() == 1);
}

TEST_CASE("the scaler state round-trips through a checkpoint exactly", "[unit][precision]") {
  LossScaler a(dynamic(16, 5, 2));
  drive(a, {false, true, false, false, true, true, false});
  LossScaler b(dynamic(16, 5, 2));
  REQUIRE(b.load_state(a.state(), "test"));
  CHECK(b.scale() == a.scale());
  CHECK(b.iteration() == a.iteration());
  CHECK(b.hysteresis_left() == a.hysteresis_left());
  // From here on both follow the same sequence.
  const std::vector<bool> rest = {false, false, false, true, false, false, false, false, false};
  CHECK(drive(a, rest) == drive(b, rest));
  // A checkpoint without scaler state leaves the initial scale; a partial one is an error naming the key.
  LossScaler c(dynamic(16, 5, 2));
  CHECK_FALSE(c.load_state({}, "test"));
  CHECK(c.scale() == 65536);
  auto partial = a.state();
  partial.erase("loss_scaler.cur_iter");
  try {
    c.load_state(partial, "ckpt/optimizer.safetensors");
    FAIL("expected an error");
  } catch (const RuntimeFailure& e) {
    CHECK_THAT(e.what(), Catch::Contains("loss_scaler.cur_iter") && Catch::Contains("ckpt/optimizer.safetensors"));
  }
}
