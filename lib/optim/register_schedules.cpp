// Registers the built-in optim components (called from register_builtins()).
#include "optim/schedule.h"
#include "registry/registry.h"

namespace hftrain {

void register_schedules(Registry<Schedule, const ScheduleContext&>& schedules) {
  schedules.add<LinearSchedule>("linear", "Linear warmup, then linear decay to 0 (HF 'linear').");
}

}  // namespace hftrain
