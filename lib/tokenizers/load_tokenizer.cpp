// Tokenizer selection by spec value (see load_tokenizer.h).
#include "tokenizers/load_tokenizer.h"

#include <filesystem>

#include "tokenizers/hf_tokenizer.h"
#include "tokenizers/sentencepiece_tokenizer.h"
#include "util/error.h"
#include "util/hub_ids.h"

namespace hftrain {
namespace {

namespace fs = std::filesystem;

// The files of an HF tokenizer directory (AutoTokenizer.save_pretrained's, for fast and slow tokenizers).
const char* const kHfTokenizerFiles[] = {"tokenizer.json",  "tokenizer_config.json", "special_tokens_map.json",
                                         "added_tokens.json", "chat_template.jinja",   "chat_template.json",
                                         "vocab.json",       "merges.txt",            "vocab.txt",
                                         "tokenizer.model",  "spiece.model",          "sentencepiece.bpe.model"};

// The tokenizer files in the directory `value` names, or that holds the file it names (a file of another
// name is saved as tokenizer.json / tokenizer.model, the names HF reads).
std::vector<Tokenizer::File> tokenizer_files(const std::string& value) {
  std::error_code ec;
  const bool is_dir = fs::is_directory(value, ec);
  const fs::path dir = is_dir ? fs::path(value) : fs::path(value).parent_path();
  std::vector<Tokenizer::File> files;
  std::string named_as;  // the name the file `value` names is saved under
  if (!is_dir) named_as = fs::path(value).extension() == ".model" ? "tokenizer.model" : "tokenizer.json";
  if (!is_dir) files.push_back({value, named_as});
  for (const char* name : kHfTokenizerFiles) {
    const fs::path path = dir / name;
    if (name == named_as || !fs::is_regular_file(path, ec) || (!is_dir && fs::equivalent(path, value, ec))) continue;
    files.push_back({path.string(), name});
  }
  return files;
}

std::shared_ptr<const Tokenizer> read_tokenizer(const std::string& value, const std::string& where) {
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
                      "file, or a directory holding one (no such file or directory; " + nothing_downloaded_hint() + ")");
  throw ConfigError(where + ": '" + value + "' is not a tokenizer: expected a tokenizer.json (.json) or sentencepiece model (.model)");
}

}  // namespace

std::shared_ptr<const Tokenizer> load_tokenizer(const std::string& value, const std::string& where) {
  std::shared_ptr<const Tokenizer> tokenizer = read_tokenizer(value, where);
  // The object was made just now and is not shared yet: its file list is set before anyone sees it.
  if (value != "bytes") std::const_pointer_cast<Tokenizer>(tokenizer)->set_files(tokenizer_files(value));
  return tokenizer;
}

}  // namespace hftrain
