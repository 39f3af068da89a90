// Explicit registration of the built-in components (see register_builtins.h). Each layer registers its own
// components in its register_*.cpp, so adding a component touches only its own layer.
#include "builtins/register_builtins.h"

namespace hftrain {

void register_models(Registry<Model, const ModelContext&>& models);
void register_data_sources(Registry<DataSource, const DataUse&>& data);
void register_optimizers(Registry<Optimizer, std::vector<ParamGroup>, const OptimizerHyper&>& optimizers);
void register_schedules(Registry<Schedule, const ScheduleContext&>& schedules);
void register_metrics(Registry<Metric>& metrics);
void register_callbacks(Registry<TrainerCallback, const CallbackContext&>& callbacks);

void register_builtins(Components& c) {
  register_models(c.models);
  register_data_sources(c.data);
  register_optimizers(c.optimizers);
  register_schedules(c.schedulers);
  register_metrics(c.metrics);
  register_callbacks(c.callbacks);
}

const Components& builtin_components() {
  static const Components components = [] {
    Components c;
    register_builtins(c);
    return c;
  }();
  return components;
}

}  // namespace hftrain
