// Finding, reading and rendering a chat template (see chat_template.h).
#include "data/chat_template.h"

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "util/error.h"

namespace hftrain {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

std::string read_text(const fs::path& p, const std::string& key) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw ConfigError(key + ": cannot read the chat template file '" + p.string() + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Json read_json(const fs::path& p, const std::string& key) {
  try {
    return Json::parse(read_text(p, key));
  } catch (const Json::parse_error& e) {
    throw ConfigError(key + ": " + p.string() + ": malformed JSON: " + e.what());
  }
}

struct Found {
  std::string text;
  std::string name;  // for errors: the file, and the list entry
};

// tokenizer_config.json's chat_template: a string, or a list of {name, template} (HF picks `wanted`, else
// "default").
std::optional<Found> from_config_value(const Json& value, const fs::path& file, const std::string& wanted,
                                       const std::string& key) {
  if (value.is_null()) return std::nullopt;
  if (value.is_string()) {
    if (!wanted.empty())
      throw ConfigError("data.chat_template_name: '" + wanted + "' names an entry of a list of templates, and " +
                        file.string() + " has a single chat_template");
    return Found{value.get<std::string>(), file.string() + " chat_template"};
  }
  if (!value.is_array())
    throw ConfigError(key + ": " + file.string() + ": chat_template is neither a string nor a list of {name, template}");
  const std::string name = wanted.empty() ? "default" : wanted;
  std::string names;
  for (const auto& entry : value) {
    if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") || !entry["name"].is_string() ||
        !entry["template"].is_string())
      throw ConfigError(key + ": " + file.string() + ": a chat_template list entry is not {\"name\": ..., \"template\": ...}");
    const std::string n = entry["name"].get<std::string>();
    if (n == name) return Found{entry["template"].get<std::string>(), file.string() + " chat_template '" + n + "'"};
    names += (names.empty() ? "" : ", ") + n;
  }
  throw ConfigError("data.chat_template_name: " + file.string() + " has no chat template named '" + name + "' (it has: " +
                    names + ")");
}

// The template of a tokenizer directory: chat_template.jinja (what transformers saves now, and prefers),
// else tokenizer_config.json's chat_template, else chat_template.json's.
std::optional<Found> from_directory(const fs::path& dir, const std::string& wanted, const std::string& key) {
  std::error_code ec;
  if (fs::is_regular_file(dir / "chat_template.jinja", ec) && wanted.empty())
    return Found{read_text(dir / "chat_template.jinja", key), (dir / "chat_template.jinja").string()};
  for (const char* name : {"tokenizer_config.json", "chat_template.json"}) {
    const fs::path f = dir / name;
    if (!fs::is_regular_file(f, ec)) continue;
    const Json j = read_json(f, key);
    if (j.is_object() && j.contains("chat_template")) return from_config_value(j["chat_template"], f, wanted, key);
  }
  return std::nullopt;
}

// The special tokens HF passes (special_tokens_map: the *_token entries and additional_special_tokens) from
// tokenizer_config.json, then special_tokens_map.json, which wins.
Json special_tokens_of(const fs::path& dir) {
  Json vars = Json::object();
  std::error_code ec;
  for (const char* name : {"tokenizer_config.json", "special_tokens_map.json"}) {
    const fs::path f = dir / name;
    if (!fs::is_regular_file(f, ec)) continue;
    const Json j = read_json(f, "data.tokenizer");
    if (!j.is_object()) continue;
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& k = it.key();
      const bool token_key = k.size() > 6 && k.compare(k.size() - 6, 6, "_token") == 0;
      if (!token_key && k != "additional_special_tokens") continue;
      const Json& v = it.value();
      if (v.is_string()) vars[k] = v;
      else if (v.is_object() && v.contains("content") && v["content"].is_string()) vars[k] = v["content"];
      else if (v.is_null()) vars.erase(k);
      else if (k == "additional_special_tokens" && v.is_array()) {
        Json list = Json::array();
        for (const auto& t : v)
          if (t.is_string()) list.push_back(t);
          else if (t.is_object() && t.contains("content")) list.push_back(t["content"]);
        vars[k] = list;
      }
    }
  }
  return vars;
}

fs::path tokenizer_dir(const std::string& tokenizer) {
  std::error_code ec;
  if (tokenizer.empty() || tokenizer == "bytes") return {};
  if (fs::is_directory(tokenizer, ec)) return fs::path(tokenizer);
  if (fs::is_regular_file(tokenizer, ec)) return fs::path(tokenizer).parent_path();
  return {};
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& text, const std::string& name, nlohmann::ordered_json variables)
    : text_(text), template_(jinja::Template::parse(text, name)), variables_(std::move(variables)) {
  static const std::regex kGeneration(R"(\{%-?\s*generation\s*-?%\})");
  has_generation_ = std::regex_search(text_, kGeneration);
}

std::optional<ChatTemplate> ChatTemplate::load(const ChatTemplateSource& source) {
  const fs::path dir = tokenizer_dir(source.tokenizer);
  std::optional<Found> found;
  std::error_code ec;
  if (!source.file.empty()) {
    const std::string key = "data.chat_template";
    if (fs::is_directory(source.file, ec)) {
      found = from_directory(source.file, source.name, key);
      if (!found) throw ConfigError(key + ": the directory '" + source.file + "' holds no chat template");
    } else if (fs::is_regular_file(source.file, ec)) {
      found = Found{read_text(source.file, key), source.file};
    } else {
      throw ConfigError(key + ": '" + source.file + "' is neither a template file nor a tokenizer directory");
    }
  } else if (!dir.empty()) {
    found = from_directory(dir, source.name, "data.tokenizer");
  }
  if (!found) {
    if (!source.name.empty())
      throw ConfigError("data.chat_template_name: '" + source.name + "' is given, but there is no chat template");
    return std::nullopt;
  }
  Json vars = dir.empty() ? Json::object() : special_tokens_of(dir);
  if (!source.eos_token.empty()) vars["eos_token"] = source.eos_token;
  if (!source.pad_token.empty()) vars["pad_token"] = source.pad_token;
  return ChatTemplate(found->text, found->name, vars);
}

jinja::RenderResult ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                         const nlohmann::ordered_json& tools) const {
  jinja::ChatTemplateInputs in;
  in.messages = messages;
  in.tools = tools;
  in.add_generation_prompt = add_generation_prompt;
  in.variables = variables_;
  return template_.render_chat(in);
}

std::string ChatTemplate::special_token(const std::string& key) const {
  auto it = variables_.find(key);
  return it != variables_.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace hftrain
