// tokenizer.json post-processors (see hf_post_processor.h).
#include "tokenizers/hf_post_processor.h"

namespace hftrain::hf {
namespace {

std::vector<TemplatePiece> parse_template(const Json& j, const std::string& what) {
  std::vector<TemplatePiece> out;
  for (const auto& pj : j) {
    TemplatePiece p;
    if (pj.contains("SpecialToken")) {
      p.special = true;
      p.name = pj.at("SpecialToken").at("id").get<std::string>();
      p.type_id = pj.at("SpecialToken").value("type_id", 0);
    } else if (pj.contains("Sequence")) {
      p.name = pj.at("Sequence").at("id").get<std::string>();
      p.type_id = pj.at("Sequence").value("type_id", 0);
      if (p.name != "A" && p.name != "B") throw FormatError(what + ": sequence id must be A or B, not " + p.name);
    } else {
      throw FormatError(what + ": a piece is neither SpecialToken nor Sequence");
    }
    out.push_back(p);
  }
  return out;
}

std::pair<std::string, int64_t> token_and_id(const Json& j, const std::string& what) {
  if (!j.is_array() || j.size() != 2) throw FormatError(what + " must be [token, id]");
  return {j.at(0).get<std::string>(), j.at(1).get<int64_t>()};
}

}  // namespace

bool parse_post_processor(const Json& j, PostProcessor& pp) {
  if (j.is_null()) return false;
  std::string type = type_of(j, "post_processor");
  if (type == "ByteLevel") return false;
  if (type == "Sequence") {
    bool any = false;
    for (const auto& s : j.at("processors")) any = parse_post_processor(s, pp) || any;
    return any;
  }
  auto sp = [](const std::string& n, int64_t t) { return TemplatePiece{true, n, t}; };
  auto seq = [](const std::string& n, int64_t t) { return TemplatePiece{false, n, t}; };
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    pp.cls = token_and_id(j.at("cls"), "post_processor.cls");
    pp.sep = token_and_id(j.at("sep"), "post_processor.sep");
    const std::string c = pp.cls->first, s = pp.sep->first;
    pp.special_ids = {{c, {pp.cls->second}}, {s, {pp.sep->second}}};
    pp.single = {sp(c, 0), seq("A", 0), sp(s, 0)};
    if (type == "BertProcessing") pp.pair = {sp(c, 0), seq("A", 0), sp(s, 0), seq("B", 1), sp(s, 1)};
    else pp.pair = {sp(c, 0), seq("A", 0), sp(s, 0), sp(s, 0), seq("B", 0), sp(s, 0)};
    return true;
  }
  if (type == "TemplateProcessing") {
    pp.single = parse_template(j.at("single"), "post_processor.single");
    pp.pair = parse_template(j.at("pair"), "post_processor.pair");
    pp.special_ids.clear();
    const Json& st = j.at("special_tokens");
    for (auto it = st.begin(); it != st.end(); ++it) pp.special_ids[it.key()] = it.value().at("ids").get<std::vector<int64_t>>();
    for (const auto* t : {&pp.single, &pp.pair})
      for (const auto& p : *t)
        if (p.special && !pp.special_ids.count(p.name))
          throw FormatError("post_processor: special token \"" + p.name + "\" is not in special_tokens");
    return true;
  }
  throw UnsupportedError("unsupported post_processor type \"" + type + "\"");
}

}  // namespace hftrain::hf
