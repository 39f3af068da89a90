// Learning-rate schedules against values worked out by hand from HF's lambdas (transformers
// optimization.py), torch's ReduceLROnPlateau rules and DeepSpeed's WarmupLR / WarmupDecayLR, at
// boundaries (step 0, end of warmup W, total T, beyond T); plus option validation.
#include <catch2/catch.hpp>

#include <cmath>

#include "builtins/register_builtins.h"
#include "optim/schedule.h"
#include "util/error.h"

using namespace hftrain;
using Catch::Matchers::Contains;

namespace {

// base lr 2.0 throughout, so lr = 2 * factor.
constexpr double kBase = 2.0;

std::unique_ptr<Schedule> make(const std::string& type, const std::string& yaml, int64_t W, int64_t T,
                               double base = kBase) {
  const auto& c = builtin_components();
  Issues issues("test.yaml");
  auto options = c.schedulers.parse(type, YAML::Load(yaml), "scheduler", issues, {"type"});
  issues.throw_if_any();
  return c.schedulers.build(type, options, ScheduleContext{base, W, T});
}

std::string parse_problems(const std::string& type, const std::string& yaml) {
  const auto& c = builtin_components();
  Issues issues("test.yaml");
  c.schedulers.parse(type, YAML::Load(yaml), "scheduler", issues, {"type"});
  std::string all;
  for (const auto& m : issues.messages()) all += m + "\n";
  return all;
}

}  // namespace

TEST_CASE("every HF and DeepSpeed schedule is registered", "[unit][optim][schedule]") {
  const auto& c = builtin_components();
  for (const char* name : {"linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup",
                           "inverse_sqrt", "cosine_with_min_lr", "warmup_stable_decay", "reduce_lr_on_plateau",
                           "WarmupLR", "WarmupDecayLR", "WarmupCosineLR"})
    CHECK(c.schedulers.contains(name));
}

TEST_CASE("linear: warmup to the peak, then linear decay to 0 at T", "[unit][optim][schedule]") {
  auto s = make("linear", "{}", 10, 110);
  CHECK(s->lr(0) == 0.0);
  CHECK(s->lr(5) == Approx(1.0).epsilon(1e-15));
  CHECK(s->lr(10) == Approx(2.0).epsilon(1e-15));
  CHECK(s->lr(60) == Approx(1.0).epsilon(1e-15));
  CHECK(s->lr(110) == 0.0);
  CHECK(s->lr(200) == 0.0);  // max(0, ...)
  CHECK(make("linear", "{}", 0, 100)->lr(0) == Approx(2.0));  // no warmup: max(1, W) guards the division
  CHECK(s->steps_per_optimizer_step());
  CHECK(s->state().empty());
}

TEST_CASE("cosine: half a wave by default, num_cycles honoured, and it rises again beyond T", "[unit][optim][schedule]") {
  auto s = make("cosine", "{}", 10, 110);
  CHECK(s->lr(0) == 0.0);
  CHECK(s->lr(5) == Approx(1.0));
  CHECK(s->lr(10) == Approx(2.0));
  CHECK(s->lr(35) == Approx(2.0 * 0.5 * (1 + std::sqrt(0.5))));  // p = 1/4: cos(pi/4)
  CHECK(s->lr(60) == Approx(1.0));                               // p = 1/2: cos(pi/2) = 0
  CHECK(s->lr(110) == Approx(0.0).margin(1e-15));
  CHECK(s->lr(160) == Approx(1.0));  // p = 3/2: HF does not clamp progress, cos(3pi/2) = 0
  auto full = make("cosine", "{num_cycles: 1.0}", 10, 110);
  CHECK(full->lr(60) == Approx(0.0).margin(1e-15));  // cos(pi) = -1
  CHECK(full->lr(110) == Approx(2.0));               // a full wave is back at the peak
}

TEST_CASE("cosine_with_restarts: hard restarts, zero from T on", "[unit][optim][schedule]") {
  auto one = make("cosine_with_restarts", "{}", 10, 110);  // num_cycles 1: one plain decay
  CHECK(one->lr(60) == Approx(1.0));
  CHECK(one->lr(109) == Approx(2.0 * 0.5 * (1 + std::cos(M_PI * 0.99))));
  auto s = make("cosine_with_restarts", "{num_cycles: 2}", 10, 110);
  CHECK(s->lr(5) == Approx(1.0));
  CHECK(s->lr(10) == Approx(2.0));
  CHECK(s->lr(35) == Approx(1.0));  // (2 * 0.25) mod 1 = 0.5
  CHECK(s->lr(59) == Approx(2.0 * 0.5 * (1 + std::cos(M_PI * 0.98))));
  CHECK(s->lr(60) == Approx(2.0));  // restart
  CHECK(s->lr(85) == Approx(1.0));
  CHECK(s->lr(110) == 0.0);  // p >= 1
  CHECK(s->lr(150) == 0.0);
}

TEST_CASE("polynomial: decays to lr_end at T and stays there", "[unit][optim][schedule]") {
  auto s = make("polynomial", "{lr_end: 0.02, power: 2.0}", 10, 110);
  CHECK(s->lr(0) == 0.0);
  CHECK(s->lr(5) == Approx(1.0));
  CHECK(s->lr(10) == Approx(2.0));
  CHECK(s->lr(60) == Approx((2.0 - 0.02) * 0.25 + 0.02));
  CHECK(s->lr(110) == Approx(0.02));
  CHECK(s->lr(111) == Approx(0.02));
  CHECK(s->lr(500) == Approx(0.02));
  auto lin = make("polynomial", "{}", 0, 100);  // lr_end 1e-7, power 1
  CHECK(lin->lr(50) == Approx((2.0 - 1e-7) * 0.5 + 1e-7));
  CHECK(lin->lr(100) == Approx(1e-7));
}

TEST_CASE("constant ignores warmup, constant_with_warmup does not", "[unit][optim][schedule]") {
  auto c = make("constant", "{}", 10, 110);
  CHECK(c->lr(0) == 2.0);
  CHECK(c->lr(5) == 2.0);
  CHECK(c->lr(1000) == 2.0);
  auto w = make("constant_with_warmup", "{}", 10, 110);
  CHECK(w->lr(0) == 0.0);
  CHECK(w->lr(5) == Approx(1.0));
  CHECK(w->lr(10) == 2.0);
  CHECK(w->lr(110) == 2.0);
  CHECK(w->lr(1000) == 2.0);
}

TEST_CASE("inverse_sqrt: timescale defaults to W, or 10000 without warmup", "[unit][optim][schedule]") {
  auto s = make("inverse_sqrt", "{}", 10, 110);
  CHECK(s->lr(0) == 0.0);
  CHECK(s->lr(5) == Approx(1.0));
  CHECK(s->lr(10) == Approx(2.0));
  CHECK(s->lr(30) == Approx(2.0 / std::sqrt(3.0)));  // (30 + 10 - 10) / 10 = 3
  CHECK(s->lr(1000) == Approx(2.0 / std::sqrt(100.0)));
  auto no_warmup = make("inverse_sqrt", "{}", 0, 110);
  CHECK(no_warmup->lr(0) == Approx(2.0));
  CHECK(no_warmup->lr(30000) == Approx(1.0));  // sqrt(40000 / 10000) = 2
  auto scaled = make("inverse_sqrt", "{timescale: 40}", 10, 110);
  CHECK(scaled->lr(10) == Approx(2.0));
  CHECK(scaled->lr(130) == Approx(1.0));  // (130 + 30) / 40 = 4
}

TEST_CASE("cosine_with_min_lr: cosine to a floor given as a rate or an absolute lr", "[unit][optim][schedule]") {
  auto rate = make("cosine_with_min_lr", "{min_lr_rate: 0.1}", 10, 110);
  CHECK(rate->lr(0) == 0.0);
  CHECK(rate->lr(5) == Approx(1.0));
  CHECK(rate->lr(10) == Approx(2.0));
  CHECK(rate->lr(60) == Approx(2.0 * (0.5 * 0.9 + 0.1)));
  CHECK(rate->lr(110) == Approx(0.2));
  auto abs = make("cosine_with_min_lr", "{min_lr: 0.5}", 10, 110);  // rate 0.25
  CHECK(abs->lr(60) == Approx(2.0 * (0.5 * 0.75 + 0.25)));
  CHECK(abs->lr(110) == Approx(0.5));
}

TEST_CASE("cosine_with_min_lr needs exactly one of min_lr and min_lr_rate", "[unit][optim][schedule]") {
  CHECK_THROWS_AS(make("cosine_with_min_lr", "{min_lr: 0.5, min_lr_rate: 0.1}", 10, 110), ConfigError);
  CHECK_THROWS_WITH(make("cosine_with_min_lr", "{min_lr: 0.5, min_lr_rate: 0.1}", 10, 110),
                    Contains("scheduler.min_lr_rate") && Contains("only one"));
  CHECK_THROWS_WITH(make("cosine_with_min_lr", "{}", 10, 110), Contains("scheduler.min_lr"));
}

TEST_CASE("warmup_stable_decay: warmup, stable, decay, floor", "[unit][optim][schedule]") {
  auto s = make("warmup_stable_decay", "{num_decay_steps: 20}", 10, 110);  // stable = 110 - 10 - 20 = 80
  CHECK(s->lr(0) == 0.0);
  CHECK(s->lr(5) == Approx(1.0));
  CHECK(s->lr(10) == 2.0);
  CHECK(s->lr(89) == 2.0);
  CHECK(s->lr(90) == Approx(2.0));   // decay starts at cos(0)
  CHECK(s->lr(100) == Approx(1.0));  // cosine half way
  CHECK(s->lr(110) == 0.0);          // min_lr_ratio
  CHECK(s->lr(500) == 0.0);
  auto shaped = make("warmup_stable_decay",
                     "{num_decay_steps: 20, warmup_type: cosine, decay_type: 1-sqrt, min_lr_ratio: 0.1}", 10, 110);
  CHECK(shaped->lr(0) == Approx(0.2));                      // starts at the floor
  CHECK(shaped->lr(5) == Approx(2.0 * (0.5 * 0.9 + 0.1)));  // 0.5 * (1 - cos(pi/2))
  CHECK(shaped->lr(100) == Approx(2.0 * ((1 - std::sqrt(0.5)) * 0.9 + 0.1)));
  CHECK(shaped->lr(110) == Approx(0.2));
  auto sqrt_warmup = make("warmup_stable_decay", "{num_decay_steps: 20, warmup_type: 1-sqrt, decay_type: linear}", 10, 110);
  CHECK(sqrt_warmup->lr(5) == Approx(2.0 * (1 - std::sqrt(0.5))));
  CHECK(sqrt_warmup->lr(95) == Approx(2.0 * 0.75));
  auto explicit_stable = make("warmup_stable_decay", "{num_decay_steps: 20, num_stable_steps: 30}", 10, 110);
  CHECK(explicit_stable->lr(39) == 2.0);
  CHECK(explicit_stable->lr(50) == Approx(1.0));
  CHECK(explicit_stable->lr(60) == 0.0);
  CHECK(explicit_stable->lr(110) == 0.0);
}

TEST_CASE("reduce_lr_on_plateau follows torch's ReduceLROnPlateau", "[unit][optim][schedule]") {
  auto s = make("reduce_lr_on_plateau", "{factor: 0.5, patience: 2, threshold: 0.1, cooldown: 1, min_lr: 0.3}", 10, 110);
  CHECK_FALSE(s->steps_per_optimizer_step());
  CHECK(s->lr(0) == 2.0);  // no warmup
  CHECK(s->lr(50) == 2.0);
  // metric, expected lr after observing it (worked through torch's step()):
  const std::vector<std::pair<double, double>> seq = {
      {10.0, 2.0},  // best = 10
      {9.5, 2.0},   // not < 10 * 0.9: bad 1
      {9.2, 2.0},   // bad 2 (patience 2: not yet)
      {9.1, 1.0},   // bad 3 > 2: halve; cooldown 1
      {9.0, 1.0},   // 9.0 is not < 9.0; cooldown swallows it
      {9.5, 1.0},   // bad 1
      {9.5, 1.0},   // bad 2
      {9.5, 0.5},   // bad 3: halve
      {8.0, 0.5},   // new best (8 < 9)
      {8.0, 0.5}, {8.0, 0.5}, {8.0, 0.3},  // halving would give 0.25: clamped to min_lr
      {8.0, 0.3}, {8.0, 0.3}, {8.0, 0.3}, {8.0, 0.3},  // at min_lr: no further change
  };
  for (std::size_t i = 0; i < seq.size(); ++i) {
    s->observe_metric(seq[i].first);
    INFO("observation " << i + 1);
    CHECK(s->lr(0) == Approx(seq[i].second));
  }
  auto mx = make("reduce_lr_on_plateau", "{mode: max, threshold_mode: abs, threshold: 0.5, patience: 0}", 10, 110);
  mx->observe_metric(1.0);
  CHECK(mx->lr(0) == 2.0);
  mx->observe_metric(1.4);  // not > 1.0 + 0.5: bad 1 > patience 0
  CHECK(mx->lr(0) == Approx(0.2));
  mx->observe_metric(1.6);  // better
  CHECK(mx->lr(0) == Approx(0.2));
  auto tiny = make("reduce_lr_on_plateau", "{patience: 0, eps: 0.5}", 10, 110, 0.5);
  tiny->observe_metric(1.0);
  tiny->observe_metric(1.0);  // 0.5 -> 0.05 changes by 0.45 < eps: skipped
  CHECK(tiny->lr(0) == 0.5);
}

TEST_CASE("reduce_lr_on_plateau state survives a checkpoint", "[unit][optim][schedule]") {
  const std::string opts = "{factor: 0.5, patience: 1, cooldown: 2}";
  auto a = make("reduce_lr_on_plateau", opts, 0, 100);
  for (double m : {5.0, 5.0, 5.0, 4.0}) a->observe_metric(m);
  const std::string saved = a->state().dump();  // through JSON text, as a checkpoint stores it
  auto b = make("reduce_lr_on_plateau", opts, 0, 100);
  b->load_state(nlohmann::json::parse(saved));
  CHECK(b->lr(0) == a->lr(0));
  for (double m : {4.0, 4.0, 4.0, 4.0, 3.0, 3.0, 3.0}) {
    a->observe_metric(m);
    b->observe_metric(m);
    CHECK(b->lr(0) == a->lr(0));
  }
  CHECK(a->lr(0) < 1.0);  // the sequence did reduce
  auto fresh = make("reduce_lr_on_plateau", opts, 0, 100);
  fresh->load_state(make("reduce_lr_on_plateau", opts, 0, 100)->state());  // unset best (inf) round-trips
  fresh->observe_metric(1e30);
  CHECK(fresh->state()["best"] == 1e30);
  CHECK_THROWS_AS(fresh->load_state(nlohmann::json{{"lr", 1.0}}), RuntimeFailure);
}

TEST_CASE("DeepSpeed WarmupLR: starts at warmup_min_lr, one step behind the optimizer", "[unit][optim][schedule]") {
  // lr(s) = min + (max - min) * gamma(s - 1); gamma(it) = log(it + 1) / log(W) while it < W.
  auto log = make("WarmupLR", "{warmup_min_lr: 0.1, warmup_num_steps: 10}", 0, 100);
  CHECK(log->lr(0) == Approx(0.1));
  CHECK(log->lr(1) == Approx(0.1));
  CHECK(log->lr(2) == Approx(0.1 + 1.9 * std::log(2.0) / std::log(10.0)));
  CHECK(log->lr(10) == Approx(2.0));  // it = 9: log(10) / log(10)
  CHECK(log->lr(11) == Approx(2.0));
  CHECK(log->lr(100000) == Approx(2.0));
  auto lin = make("WarmupLR", "{warmup_min_lr: 0.1, warmup_max_lr: 1.1, warmup_num_steps: 10, warmup_type: linear}", 0, 100);
  CHECK(lin->lr(0) == Approx(0.1));
  CHECK(lin->lr(2) == Approx(0.1 + 1.0 * 0.1));
  CHECK(lin->lr(10) == Approx(0.1 + 1.0 * 0.9));
  CHECK(lin->lr(11) == Approx(1.1));
  // Unset warmup_num_steps comes from the run's warmup (HF "auto"), at least 2.
  auto defaults = make("WarmupLR", "{}", 0, 100);
  CHECK(defaults->lr(1) == 0.0);
  CHECK(defaults->lr(2) == Approx(2.0));  // Wd = max(2, 0): log(2) / log(2)
  auto from_run = make("WarmupLR", "{warmup_type: linear}", 20, 100);
  CHECK(from_run->lr(11) == Approx(2.0 * 10 / 20));
}

TEST_CASE("DeepSpeed WarmupDecayLR: warmup, then linear decay to warmup_min_lr at total_num_steps", "[unit][optim][schedule]") {
  auto s = make("WarmupDecayLR", "{warmup_min_lr: 0.1, warmup_num_steps: 10, warmup_type: linear}", 0, 110);
  CHECK(s->lr(0) == Approx(0.1));
  CHECK(s->lr(5) == Approx(0.1 + 1.9 * 0.4));          // it = 4
  CHECK(s->lr(11) == Approx(2.0));                     // it = 10: (110 - 10) / 100
  CHECK(s->lr(61) == Approx(0.1 + 1.9 * 0.5));         // it = 60
  CHECK(s->lr(110) == Approx(0.1 + 1.9 * 1.0 / 100));  // it = 109: one step behind HF's linear
  CHECK(s->lr(111) == Approx(0.1));
  CHECK(s->lr(500) == Approx(0.1));
  auto total = make("WarmupDecayLR", "{total_num_steps: 60, warmup_num_steps: 10}", 0, 110);
  CHECK(total->lr(36) == Approx(2.0 * 25.0 / 50.0));  // it = 35
  CHECK(total->lr(61) == 0.0);
}

TEST_CASE("DeepSpeed WarmupCosineLR: ratios of the learning rate, lr 0 before the first scheduler step", "[unit][optim][schedule]") {
  // base lr 2 (make's default); W = 10, total 110; warmup from 0.1 of the lr, cosine down to 0.05 of it.
  auto s = make("WarmupCosineLR", "{warmup_min_ratio: 0.1, cos_min_ratio: 0.05, warmup_num_steps: 10, total_num_steps: 110}", 0, 110);
  CHECK(s->lr(0) == 0.0);                                                          // it = -1: get_lr() is 0
  CHECK(s->lr(1) == Approx(2.0 * 0.1));                                            // it = 0: log(1) = 0
  CHECK(s->lr(5) == Approx(2.0 * (0.1 + 0.9 * std::log(5.0) / std::log(10.0))));  // it = 4
  CHECK(s->lr(11) == Approx(2.0 * (0.05 + 0.95 * (1 + std::cos(M_PI * 1 / 100.0)) / 2)));  // it = 10
  CHECK(s->lr(60) == Approx(2.0 * (0.05 + 0.95 * 0.5)));                           // it = 59: half way
  CHECK(s->lr(110) == Approx(2.0 * 0.05));                                         // it = 109: the end
  // Unset steps come from the run (HF "auto"); linear warmup.
  auto run = make("WarmupCosineLR", "{warmup_type: linear}", 20, 100);
  CHECK(run->lr(11) == Approx(2.0 * 10 / 20.0));
  CHECK(run->lr(21) == Approx(2.0 * (0.0001 + 0.9999 * (1 + std::cos(M_PI * 1 / 80.0)) / 2)));
  // total_num_steps == warmup_num_steps divides by 1 instead of 0 (DeepSpeed's fix for its ZeroDivisionError).
  auto degenerate = make("WarmupCosineLR", "{warmup_num_steps: 10, total_num_steps: 10}", 0, 100);
  CHECK(degenerate->lr(11) == Approx(2.0 * 0.0001));
}

TEST_CASE("schedule options are validated with the key named", "[unit][optim][schedule]") {
  CHECK_THROWS_WITH(make("polynomial", "{lr_end: 2.0}", 10, 110), Contains("scheduler.lr_end"));
  CHECK_THROWS_WITH(make("polynomial", "{}", 10, 110, 1e-8), Contains("scheduler.lr_end"));
  CHECK_THAT(parse_problems("warmup_stable_decay", "{}"), Contains("scheduler.num_decay_steps"));
  CHECK_THAT(parse_problems("warmup_stable_decay", "{num_decay_steps: 5, warmup_type: cosin}"),
             Contains("scheduler.warmup_type") && Contains("did you mean 'cosine'"));
  CHECK_THAT(parse_problems("reduce_lr_on_plateau", "{factor: 1.0}"), Contains("scheduler.factor") && Contains("< 1"));
  CHECK_THAT(parse_problems("reduce_lr_on_plateau", "{mode: maximum}"), Contains("scheduler.mode"));
  CHECK_THAT(parse_problems("WarmupLR", "{warmup_type: cosine}"), Contains("scheduler.warmup_type"));
  CHECK_THAT(parse_problems("inverse_sqrt", "{timescale: 0}"), Contains("scheduler.timescale"));
  CHECK_THAT(parse_problems("cosine", "{num_cycle: 1}"), Contains("scheduler.num_cycle") && Contains("num_cycles"));
  CHECK(parse_problems("cosine_with_min_lr", "{min_lr: null, min_lr_rate: 0.1}").empty());
}

TEST_CASE("warmup_steps_for: warmup_steps wins over warmup_ratio (HF get_warmup_steps)", "[unit][optim][schedule]") {
  CHECK(warmup_steps_for(7, 0.5, 100) == 7);
  CHECK(warmup_steps_for(0, 0.15, 50) == 8);  // ceil(7.5)
  CHECK(warmup_steps_for(0, 0.0, 50) == 0);
}
