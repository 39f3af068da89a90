// Tokenizer files as a saved model directory holds them (see saved_tokenizer.h).
#include "data/saved_tokenizer.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/fs.h"

namespace hftrain {
namespace {

using Json = nlohmann::ordered_json;

SavedTokenizerFile* find(std::vector<SavedTokenizerFile>& files, const std::string& name) {
  auto it = std::find_if(files.begin(), files.end(), [&](const SavedTokenizerFile& f) { return f.name == name; });
  return it == files.end() ? nullptr : &*it;
}

void drop(std::vector<SavedTokenizerFile>& files, const std::string& name) {
  files.erase(std::remove_if(files.begin(), files.end(), [&](const SavedTokenizerFile& f) { return f.name == name; }),
              files.end());
}

// Applies `edit` to the JSON object in `name` (created as {} when `create` and it is missing).
template <typename Edit>
void edit_json(std::vector<SavedTokenizerFile>& files, const std::string& name, bool create, Edit edit) {
  SavedTokenizerFile* f = find(files, name);
  if (!f && !create) return;
  if (!f) {
    files.push_back({name, "{}"});
    f = &files.back();
  }
  Json j;
  try {
    j = Json::parse(f->text);
  } catch (const Json::parse_error& e) {
    throw RuntimeFailure("saving the tokenizer: " + name + " is not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw RuntimeFailure("saving the tokenizer: " + name + " is not a JSON object");
  edit(j);
  f->text = j.dump(2, ' ', false, Json::error_handler_t::strict) + "\n";
}

}  // namespace

std::vector<SavedTokenizerFile> tokenizer_files_to_save(const Tokenizer& tokenizer, const TokenizerChanges& changes) {
  std::vector<SavedTokenizerFile> files;
  for (const auto& f : tokenizer.files()) files.push_back({f.name, read_text_file(f.path)});
  if (files.empty()) return files;
  if (!changes.chat_template.empty()) {
    // transformers' save_chat_templates: a single template goes to chat_template.jinja, and the config's key
    // goes away; the processor file chat_template.json would be a second, stale template.
    drop(files, "chat_template.json");
    drop(files, "chat_template.jinja");
    files.push_back({"chat_template.jinja", changes.chat_template});
    edit_json(files, "tokenizer_config.json", false, [](Json& j) { j.erase("chat_template"); });
  }
  if (!changes.eos_token.empty()) {
    // TRL sets the tokenizer's eos_token; save_pretrained writes it into both files (special_tokens_map.json
    // is read last, so an old entry there would win).
    edit_json(files, "tokenizer_config.json", true, [&](Json& j) { j["eos_token"] = changes.eos_token; });
    edit_json(files, "special_tokens_map.json", false, [&](Json& j) { j["eos_token"] = changes.eos_token; });
  }
  return files;
}

}  // namespace hftrain
