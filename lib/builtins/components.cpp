// Explicit registration of the built-in components (see components.h).
#include "builtins/components.h"

#include "data/builtin_sources.h"
#include "models/gpt.h"
#include "models/mlp.h"
#include "optim/adamw.h"

namespace hftrain {

void register_builtins(Components& c) {
  c.models.add<Gpt>("gpt", "Decoder-only transformer shaped like GPT-2/nanoGPT, weight-tied LM head.");
  c.models.add<MlpClassifier>("mlp", "Feed-forward classifier over dense feature vectors.");

  c.data.add<DigitReversalSource>("digit_reversal", "Synthetic: reverse a digit string after '='; exact-match scored.");
  c.data.add<GaussianBlobsSource>("gaussian_blobs", "Synthetic: classify points by the Gaussian blob they came from.");
  c.data.add<TextFileSource>("text_file", "A text file as bytes, cut into blocks for language modelling.");

  c.optimizers.add<AdamW>("adamw", "AdamW with torch.optim.AdamW semantics (decoupled weight decay).");

  c.schedulers.add<LinearSchedule>("linear", "Linear warmup, then linear decay to 0 (HF 'linear').");

  c.metrics.add<AccuracyMetric>("accuracy", "Fraction of scored labels predicted correctly.");
  c.metrics.add<ExactMatchMetric>("exact_match", "Fraction of examples with every scored label correct.");
  c.metrics.add<PerplexityMetric>("perplexity", "exp(eval_loss).");
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
