// Registers the built-in trainer callbacks selectable in the spec's `callbacks:` list.
#include "registry/registry.h"
#include "train/callbacks.h"
#include "train/profiler_callback.h"

namespace hftrain {

namespace {

// Adapts EarlyStoppingCallback to the registry's (options, context) constructor shape.
class EarlyStoppingFromSpec : public EarlyStoppingCallback {
 public:
  using Options = EarlyStoppingCallback::Options;
  EarlyStoppingFromSpec(const Options& o, const CallbackContext& c)
      : EarlyStoppingCallback(o, c.metric_for_best_model, c.greater_is_better) {}
};

}  // namespace

void register_callbacks(Registry<TrainerCallback, const CallbackContext&>& callbacks) {
  callbacks.add<EarlyStoppingFromSpec>("early_stopping",
                                       "Stop when metric_for_best_model stops improving (HF EarlyStoppingCallback).");
  callbacks.add<ProfilerCallback>("profiler",
                                  "PyTorch's profiler over steps wait + warmup + 1 .. + active (torch.profiler.schedule): "
                                  "a Chrome trace and a per-operator / per-kernel summary in <output_dir>/profile.");
}

}  // namespace hftrain
