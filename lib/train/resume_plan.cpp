// ResumePlan arithmetic (see resume_plan.h).
#include "train/resume_plan.h"

#include <algorithm>
#include <cmath>

#include "optim/schedule.h"
#include "runspec/sections.h"

namespace hftrain {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; }

}  // namespace

ResumePlan fresh_start(const TrainingPlan& plan) {
  ResumePlan r;
  r.first = EpochSpan{0, plan.batches_per_epoch, 0};
  r.plan = plan;
  return r;
}

ResumePlan make_resume_plan(const TrainingArgs& args, const TrainingPlan& plan, int64_t global_step,
                            const DataPosition& at, int64_t rest_batches, int64_t samples_per_batch) {
  const int64_t ga = args.gradient_accumulation_steps, upe = plan.updates_per_epoch, bpe = plan.batches_per_epoch;
  ResumePlan r;
  r.plan = plan;
  if (rest_batches <= 0) {  // the interrupted epoch was read to its end
    r.epoch = at.epoch + 1;
    r.first = EpochSpan{0, bpe, 0};
  } else if (args.ignore_data_skip) {
    r.epoch = at.epoch;
    r.first = EpochSpan{0, bpe, 0};
  } else {
    r.epoch = at.epoch;
    r.first = EpochSpan{at.samples_consumed, rest_batches, at.samples_consumed / samples_per_batch};
  }
  const int64_t first_windows = windows_for(r.first.batches, ga);
  int64_t left = 0;  // optimizer steps still to run
  if (args.max_steps > 0) {
    left = args.max_steps - global_step;
    r.plan.max_steps = args.max_steps;
  } else {
    // The data position num_train_epochs = whole epochs + a fraction, whose steps HF counts as
    // ceil(epochs x upe) - whole x upe (plan.max_steps is ceil(epochs x upe) at this layout).
    const auto whole = static_cast<int64_t>(std::floor(args.num_train_epochs));
    const int64_t fraction_steps = std::max<int64_t>(0, plan.max_steps - whole * upe);
    if (r.epoch < whole)
      left = first_windows + (whole - r.epoch - 1) * upe + fraction_steps;
    else if (r.epoch == whole)  // inside the fractional last epoch: its steps less those already taken in it
      left = fraction_steps - windows_for(bpe - r.first.batches, ga);
    r.plan.max_steps = global_step + std::max<int64_t>(0, left);
  }
  r.done = left <= 0;
  if (r.done) {
    r.plan.max_steps = std::max(r.plan.max_steps, global_step);
    r.plan.num_epochs = std::max(plan.num_epochs, r.epoch);
    r.epoch = r.plan.num_epochs;  // the epoch loop does not run
  } else {
    // The epochs the loop may start: the rest of this one, then whole epochs of upe steps.
    r.plan.num_epochs = r.epoch + 1 + ceil_div(left - first_windows, upe);
  }
  r.plan.warmup_steps = warmup_steps_for(args.warmup_steps, args.warmup_ratio, r.plan.max_steps);
  return r;
}

double epoch_progress(int64_t epoch, const EpochSpan& span, int64_t read, int64_t bpe) {
  if (read >= span.batches) return static_cast<double>(epoch + 1);
  const int64_t position = std::min(span.first_batch + read, bpe);
  return static_cast<double>(epoch) + static_cast<double>(position) / static_cast<double>(bpe);
}

}  // namespace hftrain
