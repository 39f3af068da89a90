// Registers the built-in data components (called from register_builtins()).
#include "data/builtin_sources.h"
#include "registry/registry.h"

namespace hftrain {

void register_data_sources(Registry<DataSource>& data) {
  data.add<DigitReversalSource>("digit_reversal", "Synthetic: reverse a digit string after '='; exact-match scored.");
  data.add<GaussianBlobsSource>("gaussian_blobs", "Synthetic: classify points by the Gaussian blob they came from.");
  data.add<TextFileSource>("text_file", "A text file as bytes, cut into blocks for language modelling.");
}

}  // namespace hftrain
