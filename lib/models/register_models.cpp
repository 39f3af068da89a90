// Registers the built-in models components (called from register_builtins()).
#include "models/gpt.h"
#include "models/mlp.h"
#include "registry/registry.h"

namespace hftrain {

void register_models(Registry<Model, const ModelContext&>& models) {
  models.add<Gpt>("gpt", "Decoder-only transformer shaped like GPT-2/nanoGPT, weight-tied LM head.");
  models.add<MlpClassifier>("mlp", "Feed-forward classifier over dense feature vectors.");
}

}  // namespace hftrain
