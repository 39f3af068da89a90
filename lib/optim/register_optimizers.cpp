// Registers the built-in optimizers (called from register_builtins()).
#include "optim/adafactor.h"
#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/lion.h"
#include "optim/sgd.h"
#include "registry/registry.h"

namespace hftrain {

void register_optimizers(Registry<Optimizer, std::vector<ParamGroup>, const OptimizerHyper&>& optimizers) {
  optimizers.add<AdamW>("adamw", "AdamW with torch.optim.AdamW semantics (decoupled weight decay).");
  optimizers.add<Adam>("adam", "Adam with torch.optim.Adam semantics (weight decay added to the gradient).");
  optimizers.add<Sgd>("sgd", "SGD with torch.optim.SGD semantics (momentum, dampening, nesterov).");
  optimizers.add<Adafactor>("adafactor", "Adafactor as HF's Trainer builds it (factored second moments; "
                                         "scale_parameter and relative_step off by default).");
  optimizers.add<Adagrad>("adagrad", "Adagrad with torch.optim.Adagrad semantics (lr_decay, initial_accumulator_value, "
                                     "eps; weight decay added to the gradient).");
  optimizers.add<Lion>("lion", "Lion (sign of interpolated momentum, decoupled weight decay); betas default "
                               "to training.adam_beta1/2 as in HF.");
}

}  // namespace hftrain
