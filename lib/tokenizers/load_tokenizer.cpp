// Tokenizer selection by spec value (see load_tokenizer.h).
#include "tokenizers/load_tokenizer.h"

#include <filesystem>

#include "tokenizers/hf_tokenizer.h"
#include "tokenizers/sentencepiece_tokenizer.h"
#include "util/error.h"

namespace hftrain {

std::shared_ptr<const Tokenizer> load_tokenizer(const std::string& value, const std::string& where) {
  namespace fs = std::filesystem;
  if (value == "bytes") return std::make_shared<ByteTokenizer>();
  fs::path p(value);
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    // The sentencepiece file names HF model repositories use (Llama, T5, XLM-R).
    fs::path spm;
    for (const char* name : {"tokenizer.model", "spiece.model", "sentencepiece.bpe.model"})
      if (spm.empty() && fs::is_regular_file(p / name, ec)) spm = p / name;
    if (fs::is_regular_file(p / "tokenizer.json", ec)) {
      try {
        return HfTokenizer::from_file((p / "tokenizer.json").string(), where);
      } catch (const UnsupportedTokenizerError&) {
        if (spm.empty()) throw;  // e.g. a Unigram tokenizer.json: its sentencepiece model serves instead
      }
    }
    if (!spm.empty()) return SentencePieceTokenizer::from_file(spm.string(), where);
    throw ConfigError(where + ": directory '" + value + "' holds neither tokenizer.json nor tokenizer.model");
  }
  std::string ext = p.extension().string();
  if (ext == ".json") {
    if (!fs::exists(p, ec)) throw ConfigError(where + ": tokenizer file '" + value + "' does not exist");
    return HfTokenizer::from_file(value, where);
  }
  if (ext == ".model") {
    if (!fs::exists(p, ec)) throw ConfigError(where + ": sentencepiece model '" + value + "' does not exist");
    return SentencePieceTokenizer::from_file(value, where);
  }
  if (!fs::exists(p, ec))
    throw ConfigError(where + ": '" + value + "' is not a tokenizer: expected 'bytes', a tokenizer.json or sentencepiece .model "
                      "file, or a directory holding one (no such file or directory)");
  throw ConfigError(where + ": '" + value + "' is not a tokenizer: expected a tokenizer.json (.json) or sentencepiece model (.model)");
}

}  // namespace hftrain
