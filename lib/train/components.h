// The component registries a run draws from (models, data sources, optimizers, schedules, metrics,
// callbacks). builtins/register_builtins fills them with hftrain's own components.
#pragma once

#include "data/dataset.h"
#include "metrics/metric.h"
#include "models/model.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "registry/registry.h"
#include "runspec/run_spec.h"
#include "train/callbacks.h"

namespace hftrain {

struct Components {
  Registry<Model, const ModelContext&> models{"model"};
  Registry<DataSource, const DataUse&> data{"data"};
  Registry<Optimizer, std::vector<ParamGroup>, const OptimizerHyper&> optimizers{"optimizer"};
  Registry<Schedule, const ScheduleContext&> schedulers{"scheduler"};
  Registry<Metric> metrics{"metric"};
  Registry<TrainerCallback, const CallbackContext&> callbacks{"callback"};

  ComponentCatalog catalog() const {
    auto dimensions = [this](const std::string& type, const OptionsPtr& options) { return models.facts(type, options); };
    return {models, data, optimizers, schedulers, metrics, callbacks, dimensions};
  }
};

}  // namespace hftrain
