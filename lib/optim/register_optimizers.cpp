// Registers the built-in optim components (called from register_builtins()).
#include "optim/adamw.h"
#include "registry/registry.h"

namespace hftrain {

void register_optimizers(Registry<Optimizer, std::vector<ParamGroup>, const OptimizerHyper&>& optimizers) {
  optimizers.add<AdamW>("adamw", "AdamW with torch.optim.AdamW semantics (decoupled weight decay).");
}

}  // namespace hftrain
