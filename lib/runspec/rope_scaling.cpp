// Reading and checking HF rotary-scaling configs (see rope_scaling.h). Which keys each rope_type reads
// follows transformers' modeling_rope_utils (its _validate_*_parameters and what _compute_*_parameters read).
#include "runspec/rope_scaling.h"

#include <functional>
#include <map>
#include <set>

#include "runspec/json_yaml.h"
#include "runspec/model_families.h"
#include "util/error.h"

namespace hftrain {
namespace {

struct TypeKeys {
  std::set<std::string> required, optional;
};

const std::map<std::string, TypeKeys>& type_keys() {
  static const std::map<std::string, TypeKeys> table = {
      {"default", {{}, {}}},
      {"linear", {{"factor"}, {}}},
      {"dynamic", {{"factor"}, {}}},
      {"llama3", {{"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}, {}}},
      {"yarn",
       {{"factor"},
        {"attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "original_max_position_embeddings",
         "truncate"}}},
      {"longrope", {{"short_factor", "long_factor"}, {"factor", "attention_factor", "original_max_position_embeddings"}}},
  };
  return table;
}

// rope_types other libraries or older transformers write that hftrain does not build, with the reason.
const std::map<std::string, std::string>& unbuilt_types() {
  static const std::map<std::string, std::string> table = {
      {"su", "the early Phi-3 name of longrope, which transformers no longer reads (write rope_type longrope)"},
      {"mrope", "multimodal rotary sections (Qwen2-VL) need vision position ids, which hftrain's models do not take"},
      {"ntk", "a pre-release transformers name; write rope_type dynamic for NTK scaling"},
  };
  return table;
}

std::string number(const nlohmann::json& obj, const std::string& key, double& out) {
  const auto& v = obj.at(key);
  if (!v.is_number()) return "rope_scaling." + key + ": expected a number, got " + v.dump();
  out = v.get<double>();
  return "";
}

std::string positive(const nlohmann::json& obj, const std::string& key, double& out) {
  if (std::string p = number(obj, key, out); !p.empty()) return p;
  if (!(out > 0)) return "rope_scaling." + key + ": must be > 0, got " + obj.at(key).dump();
  return "";
}

std::string factor_list(const nlohmann::json& obj, const std::string& key, std::vector<double>& out) {
  const auto& v = obj.at(key);
  out.clear();
  if (v.is_array())
    for (const auto& e : v)
      if (e.is_number() && e.get<double>() > 0) out.push_back(e.get<double>());
  if (!v.is_array() || out.size() != v.size() || out.empty())
    return "rope_scaling." + key + ": expected a list of positive numbers (one per rotary frequency), got " + v.dump();
  return "";
}

// The keys of `obj` but the type's name, checked against what `type` reads.
std::string check_keys(const nlohmann::json& obj, const std::string& type, const std::string& type_key) {
  const TypeKeys& keys = type_keys().at(type);
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string& key = it.key();
    if (key == type_key || (key == "type" && obj.contains("rope_type"))) continue;
    if (!keys.required.count(key) && !keys.optional.count(key)) {
      std::string reads;
      for (const auto* set : {&keys.required, &keys.optional})
        for (const auto& k : *set) reads += (reads.empty() ? "" : ", ") + k;
      return "rope_scaling." + key + ": rope_type '" + type + "' does not use it (it reads " +
             (reads.empty() ? std::string("no other key") : reads) + "); remove it";
    }
  }
  for (const auto& key : keys.required)
    if (!obj.contains(key) || obj.at(key).is_null())
      return "rope_scaling: rope_type '" + type + "' needs \"" + key + "\"";
  return "";
}

std::string read_type_values(const nlohmann::json& obj, RopeParameters& p) {
  std::string problem;
  auto take = [&](const std::string& key, auto&& reader) {
    if (problem.empty() && obj.contains(key) && !obj.at(key).is_null()) problem = reader(key);
  };
  take("factor", [&](const std::string& k) { p.factor_given = true; return positive(obj, k, p.factor); });
  take("low_freq_factor", [&](const std::string& k) { return positive(obj, k, p.low_freq_factor); });
  take("high_freq_factor", [&](const std::string& k) { return positive(obj, k, p.high_freq_factor); });
  take("original_max_position_embeddings", [&](const std::string& k) -> std::string {
    const auto& v = obj.at(k);
    if (!v.is_number_integer() || v.get<int64_t>() <= 0)
      return "rope_scaling." + k + ": expected a positive integer, got " + v.dump();
    p.original_max_position_embeddings = v.get<int64_t>();
    return "";
  });
  take("attention_factor", [&](const std::string& k) { double d = 0; auto r = positive(obj, k, d); p.attention_factor = d; return r; });
  take("beta_fast", [&](const std::string& k) { return positive(obj, k, p.beta_fast); });
  take("beta_slow", [&](const std::string& k) { return positive(obj, k, p.beta_slow); });
  take("mscale", [&](const std::string& k) { double d = 0; auto r = number(obj, k, d); p.mscale = d; return r; });
  take("mscale_all_dim", [&](const std::string& k) { double d = 0; auto r = number(obj, k, d); p.mscale_all_dim = d; return r; });
  take("truncate", [&](const std::string& k) -> std::string {
    if (!obj.at(k).is_boolean()) return "rope_scaling." + k + ": expected true or false, got " + obj.at(k).dump();
    p.truncate = obj.at(k).get<bool>();
    return "";
  });
  take("short_factor", [&](const std::string& k) { return factor_list(obj, k, p.short_factor); });
  take("long_factor", [&](const std::string& k) { return factor_list(obj, k, p.long_factor); });
  if (problem.empty() && p.type == "llama3" && !(p.high_freq_factor > p.low_freq_factor))
    problem = "rope_scaling: high_freq_factor (" + obj.at("high_freq_factor").dump() +
              ") must be greater than low_freq_factor (" + obj.at("low_freq_factor").dump() + ")";
  return problem;
}

// `type` read as rope_type and dropped, so that two spellings of one scaling compare equal
nlohmann::json canonical(const nlohmann::json& scaling) {
  if (!scaling.is_object()) return scaling;
  nlohmann::json out = scaling;
  if (!out.contains("rope_type") && out.contains("type")) out["rope_type"] = out["type"];
  out.erase("type");
  return out;
}

}  // namespace

std::string built_rope_types() { return "default, linear, dynamic, llama3, yarn, longrope"; }

std::string read_rope_parameters(const nlohmann::json& rope_scaling, RopeParameters& out) {
  out = RopeParameters{};
  if (rope_scaling.is_null()) return "";
  if (!rope_scaling.is_object()) return "rope_scaling: expected an object or null, got " + rope_scaling.dump();
  // transformers reads rope_type, and `type` (its older spelling) when rope_type is absent
  const std::string type_key = rope_scaling.contains("rope_type") ? "rope_type" : "type";
  if (!rope_scaling.contains(type_key)) return "rope_scaling: no \"rope_type\" (one of " + built_rope_types() + ")";
  const auto& t = rope_scaling.at(type_key);
  if (!t.is_string()) return "rope_scaling." + type_key + ": expected a string, got " + t.dump();
  out.type = t.get<std::string>();
  if (auto it = unbuilt_types().find(out.type); it != unbuilt_types().end())
    return "rope_scaling." + type_key + ": rope_type '" + out.type + "' is not built in hftrain: " + it->second;
  if (!type_keys().count(out.type))
    return "rope_scaling." + type_key + ": unknown rope_type '" + out.type + "' (hftrain builds " + built_rope_types() + ")";
  if (type_key == "rope_type" && rope_scaling.contains("type") && rope_scaling.at("type") != t)
    return "rope_scaling: \"type\" " + rope_scaling.at("type").dump() + " disagrees with \"rope_type\" " + t.dump();
  if (std::string p = check_keys(rope_scaling, out.type, type_key); !p.empty()) return p;
  return read_type_values(rope_scaling, out);
}

namespace {

// v5's rope_parameters keyed by layer type (gemma3_text): the global layers' entry, with the sliding layers' theta
// (their rotary unscaled) moved into config[family.sliding_rope_theta_key]. Other rope_parameters as they are.
nlohmann::json global_rope_parameters(const nlohmann::json& rp, const ModelFamily& family, nlohmann::json& config,
                                      const std::function<void(const std::string&)>& fail) {
  if (!rp.is_object() || (!rp.contains("full_attention") && !rp.contains("sliding_attention"))) return rp;
  const std::string& key = family.sliding_rope_theta_key;
  if (key.empty()) fail("rope_parameters: per layer type (full_attention / sliding_attention) is not built for " + family.model_type);
  for (const auto& item : rp.items())
    if (item.key() != "full_attention" && item.key() != "sliding_attention")
      fail("rope_parameters." + item.key() + ": not a layer type (full_attention, sliding_attention)");
  nlohmann::json local = rp.value("sliding_attention", nlohmann::json::object());
  if (!local.is_object()) fail("rope_parameters.sliding_attention: expected an object, got " + local.dump());
  const nlohmann::json theta = local.contains("rope_theta") ? local["rope_theta"] : nlohmann::json(10000.0);
  local.erase("rope_theta");
  if (!theta.is_number() || !(theta.get<double>() > 0))
    fail("rope_parameters.sliding_attention.rope_theta: expected a positive number, got " + theta.dump());
  if (!local.empty() && !(local.size() == 1 && local.value("rope_type", local.value("type", std::string())) == "default"))
    fail("rope_parameters.sliding_attention: " + local.dump() + " is not built (the sliding layers' rotary is unscaled: "
         "rope_type default with rope_theta)");
  if (config.contains(key) && !config[key].is_null() && config[key] != theta)
    fail(key + " " + config[key].dump() + " disagrees with rope_parameters.sliding_attention.rope_theta " + theta.dump());
  config[key] = theta;
  return rp.value("full_attention", nlohmann::json::object());
}

}  // namespace

nlohmann::json with_v4_rope_keys(const nlohmann::json& config, const std::string& config_path) {
  const ModelFamily* family = config.is_object() && config.contains("model_type") && config["model_type"].is_string()
                                  ? find_model_family(config["model_type"].get<std::string>())
                                  : nullptr;
  if (!family || !family->rotary) return config;
  nlohmann::json out = config;
  auto fail = [&](const std::string& problem) { throw ConfigError(config_path + ": " + problem); };
  if (out.contains("rope_parameters") && !out["rope_parameters"].is_null()) {
    nlohmann::json rp = global_rope_parameters(out["rope_parameters"], *family, out, fail);
    if (!rp.is_object()) fail("rope_parameters: expected an object, got " + rp.dump());
    nlohmann::json theta = rp.contains("rope_theta") ? rp["rope_theta"] : nlohmann::json(10000.0);
    if (!theta.is_number() || !(theta.get<double>() > 0)) fail("rope_parameters.rope_theta: expected a positive number, got " + theta.dump());
    rp.erase("rope_theta");
    const bool plain = rp.empty() || (rp.size() == 1 && rp.value("rope_type", rp.value("type", std::string())) == "default");
    nlohmann::json scaling = plain ? nlohmann::json(nullptr) : rp;
    // hftrain's own saves write both spellings; they must say the same
    if (out.contains("rope_theta") && !out["rope_theta"].is_null() && out["rope_theta"] != theta)
      fail("rope_theta " + out["rope_theta"].dump() + " disagrees with rope_parameters.rope_theta " + theta.dump());
    if (out.contains("rope_scaling") && !out["rope_scaling"].is_null() && canonical(out["rope_scaling"]) != canonical(scaling))
      fail("rope_scaling " + out["rope_scaling"].dump() + " disagrees with rope_parameters " + out["rope_parameters"].dump());
    out["rope_theta"] = theta;
    out["rope_scaling"] = scaling;
  }
  nlohmann::json& scaling = out["rope_scaling"];
  if (scaling.is_object() && scaling.value("rope_type", scaling.value("type", std::string())) == "longrope" &&
      !scaling.contains("original_max_position_embeddings") && out.contains("original_max_position_embeddings"))
    scaling["original_max_position_embeddings"] = out["original_max_position_embeddings"];  // Phi-3 writes it outside
  RopeParameters parameters;
  if (std::string problem = read_rope_parameters(scaling, parameters); !problem.empty()) fail(problem);
  return out;
}

nlohmann::json rope_scaling_json(const RopeScaling& scaling) {
  nlohmann::json out = scaling.value;
  if (out.is_object() && !out.contains("rope_type") && out.contains("type")) out["rope_type"] = out["type"];
  return out;
}

nlohmann::json rope_parameters_json(double rope_theta, const RopeScaling& scaling) {
  nlohmann::json out = scaling.value.is_object() ? canonical(scaling.value) : nlohmann::json{{"rope_type", "default"}};
  out["rope_theta"] = rope_theta;
  return out;
}

// ---- the model option ------------------------------------------------------------------------------
namespace {

nlohmann::json yaml_to_json(const YAML::Node& n) {
  if (n.IsNull()) return nullptr;
  if (n.IsSequence()) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& e : n) a.push_back(yaml_to_json(e));
    return a;
  }
  if (n.IsMap()) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& kv : n) o[kv.first.Scalar()] = yaml_to_json(kv.second);
    return o;
  }
  const std::string& s = n.Scalar();
  if (n.Tag() != "!") {  // unquoted: a number or boolean when it reads as one, as YAML means it
    int64_t i = 0;
    double d = 0;
    bool b = false;
    if (YAML::convert<int64_t>::decode(n, i) && s.find_first_of(".eE") == std::string::npos) return i;
    if (YAML::convert<double>::decode(n, d)) return d;
    if (YAML::convert<bool>::decode(n, b)) return b;
  }
  return s;
}

}  // namespace

bool ValueTraits<RopeScaling>::parse(const YAML::Node& n, RopeScaling& out) {
  if (!n.IsNull() && !n.IsMap()) return false;
  out.value = yaml_to_json(n);
  return true;
}

YAML::Node ValueTraits<RopeScaling>::dump(const RopeScaling& v) { return json_to_yaml(v.value); }

}  // namespace hftrain
