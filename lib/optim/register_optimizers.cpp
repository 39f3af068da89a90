// Registers the built-in optimizers (called from register_builtins()).
#include "optim/adafactor.h"
#include "optim/adagrad.h"
#include "optim/adalomo.h"
#include "optim/adam.h"
#include "optim/adamw_8bit.h"
#include "optim/galore.h"
#include "optim/lion.h"
#include "optim/lomo.h"
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
  optimizers.add<AdamW8bit>("adamw_8bit", "AdamW with both moments stored block-wise 8-bit (dynamic quantisation, "
                                          "Dettmers et al. 2021); HF optim adamw_8bit / adamw_bnb_8bit.");
  optimizers.add<GaloreAdamW>("galore_adamw", "GaLore (Zhao et al. 2024): AdamW with the weights of "
                                              "training.optim_target_modules updated in a rank-r gradient subspace.");
  optimizers.add<GaloreAdamW8bit>("galore_adamw_8bit", "GaLore with 8-bit AdamW moments (adamw_8bit) as the inner "
                                                       "optimizer.");
  optimizers.add<GaloreAdafactor>("galore_adafactor", "GaLore with Adafactor as the inner optimizer (HF's Trainer "
                                                      "defaults: scale_parameter and relative_step off).");
  optimizers.add<Lomo>("lomo", "LOMO (Lv et al. 2023): SGD fused into backward, no optimizer state; clipping by a "
                               "second backward (needs gradient_accumulation_steps 1).");
  optimizers.add<AdaLomo>("adalomo", "AdaLomo (Lv et al. 2024): LOMO with a factored second moment, grouped update "
                                     "normalisation and a parameter-RMS-scaled step, fused into backward.");
  optimizers.add<GaloreAdamWLayerwise>("galore_adamw_layerwise",
                                       "galore_adamw stepping each parameter inside backward and freeing its gradient "
                                       "(needs gradient_accumulation_steps 1, no clipping).");
  optimizers.add<GaloreAdamW8bitLayerwise>("galore_adamw_8bit_layerwise", "galore_adamw_8bit, layer-wise (see "
                                                                          "galore_adamw_layerwise).");
  optimizers.add<GaloreAdafactorLayerwise>("galore_adafactor_layerwise", "galore_adafactor, layer-wise (see "
                                                                         "galore_adamw_layerwise).");
}

}  // namespace hftrain
