// Tokenizer selection by spec value (see load_tokenizer.h).
#include "tokenizers/load_tokenizer.h"

#include "util/error.h"

namespace hftrain {

std::shared_ptr<const Tokenizer> load_tokenizer(const std::string& value, const std::string& where) {
  if (value == "bytes") return std::make_shared<ByteTokenizer>();
  throw ConfigError(where + ": '" + value + "' is not a tokenizer (expected 'bytes')");
}

}  // namespace hftrain
