// Registers the built-in optimizers (called from register_builtins()).
#include "optim/adam.h"
#include "optim/sgd.h"
#include "registry/registry.h"

namespace hftrain {

void register_optimizers(Registry<Optimizer, std::vector<ParamGroup>, const OptimizerHyper&>& optimizers) {
  optimizers.add<AdamW>("adamw", "AdamW with torch.optim.AdamW semantics (decoupled weight decay).");
  optimizers.add<Adam>("adam", "Adam with torch.optim.Adam semantics (weight decay added to the gradient).");
  optimizers.add<Sgd>("sgd", "SGD with torch.optim.SGD semantics (momentum, dampening, nesterov).");
}

}  // namespace hftrain
