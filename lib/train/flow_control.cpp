// FlowControl (see flow_control.h).
#include "train/flow_control.h"

#include <cmath>

#include "runspec/sections.h"

namespace hftrain {

int64_t resolve_interval(double value, int64_t max_steps) {
  if (value > 0 && value < 1) return static_cast<int64_t>(std::ceil(static_cast<double>(max_steps) * value));
  return static_cast<int64_t>(value);
}

FlowControl::FlowControl(const TrainingArgs& args, int64_t max_steps)
    : logging_strategy_(args.logging_strategy),
      eval_strategy_(args.eval_strategy),
      save_strategy_(args.save_strategy),
      logging_first_step_(args.logging_first_step),
      eval_delay_(args.eval_delay),
      max_steps_(max_steps),
      logging_steps_(resolve_interval(args.logging_steps, max_steps)),
      eval_steps_(resolve_interval(args.eval_steps > 0 ? args.eval_steps : args.logging_steps, max_steps)),
      save_steps_(resolve_interval(args.save_steps, max_steps)) {}

FlowDecision FlowControl::on_step_end(int64_t g) const {
  FlowDecision d;
  if (g == 1 && logging_first_step_) d.should_log = true;
  if (logging_strategy_ == "steps" && logging_steps_ > 0 && g % logging_steps_ == 0) d.should_log = true;
  if (eval_strategy_ == "steps" && eval_steps_ > 0 && g % eval_steps_ == 0 && eval_delay_ <= static_cast<double>(g))
    d.should_evaluate = true;
  if (save_strategy_ == "steps" && save_steps_ > 0 && g % save_steps_ == 0) d.should_save = true;
  if (g >= max_steps_) {
    d.should_training_stop = true;
    if (save_strategy_ == "steps") d.should_save = true;
  }
  return d;
}

FlowDecision FlowControl::on_epoch_end(double epoch) const {
  FlowDecision d;
  if (logging_strategy_ == "epoch") d.should_log = true;
  if (eval_strategy_ == "epoch" && eval_delay_ <= epoch) d.should_evaluate = true;
  if (save_strategy_ == "epoch") d.should_save = true;
  return d;
}

}  // namespace hftrain
