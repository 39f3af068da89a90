// The `search` section: its dimensions, sampler and pruner, validated as Optuna validates them (see
// search_args.h).
#include "runspec/search_args.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace hftrain {
namespace {

// The options a sampler / pruner type takes besides `type` (an option of another type is refused by name).
const std::map<std::string, std::vector<std::string>> kSamplerOptions = {
    {"tpe", {"seed", "n_startup_trials"}}, {"random", {"seed"}}, {"cmaes", {"seed", "n_startup_trials"}}};
const std::map<std::string, std::vector<std::string>> kPrunerOptions = {
    {"median", {"n_startup_trials", "n_warmup_steps", "interval_steps"}},
    {"hyperband", {"min_resource", "max_resource", "reduction_factor"}},
    {"successive_halving", {"min_resource", "reduction_factor", "min_early_stopping_rate"}},
    {"none", {}}};

std::vector<std::string> names_of(const std::map<std::string, std::vector<std::string>>& table) {
  std::vector<std::string> names;
  for (const auto& kv : table) names.push_back(kv.first);
  return names;
}

// Parses a sampler / pruner mapping with its schema, then refuses options its type does not take.
template <class S>
void parse_choice(const YAML::Node& node, const std::string& path, const std::map<std::string, std::vector<std::string>>& table,
                  Issues& issues, S& out) {
  schema_of<S>().parse(node, path, out, issues);
  auto allowed = table.find(out.type);
  if (allowed == table.end() || !node.IsMap()) return;  // a bad type was reported by the schema
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    if (key == "type" || !schema_of<S>().find(key)) continue;
    bool ok = false;
    for (const auto& name : allowed->second) ok = ok || name == key;
    if (!ok) {
      std::string takes;
      for (const auto& name : allowed->second) takes += (takes.empty() ? "" : ", ") + name;
      issues.add(path + "." + key, kv.first, "not an option of the " + out.type + " " + path.substr(path.rfind('.') + 1) +
                                                 " (it takes " + (takes.empty() ? std::string("none") : takes) + ")");
    }
  }
}

// A categorical choice: a plain scalar is a boolean, integer or number when it reads as one (as YAML
// would), a quoted one always a string.
nlohmann::json choice_value(const YAML::Node& n) {
  if (n.IsNull()) return nullptr;
  const std::string& text = n.Scalar();
  if (n.Tag() != "!") {
    if (text == "true" || text == "True") return true;
    if (text == "false" || text == "False") return false;
    char* end = nullptr;
    const long long i = std::strtoll(text.c_str(), &end, 10);
    if (!text.empty() && *end == '\0') return static_cast<int64_t>(i);
    const double d = std::strtod(text.c_str(), &end);
    if (!text.empty() && *end == '\0') return d;
  }
  return text;
}

bool integral(double v) { return std::floor(v) == v && std::fabs(v) < 9.0e15; }

// The numeric bounds of a float / int dimension: present, ordered, positive with log, integral for int.
void check_numeric(const YAML::Node& node, const std::string& path, SearchParam& p, Issues& issues) {
  std::map<std::string, double> given;
  for (const auto& key : {"low", "high", "step"}) {
    YAML::Node v = lookup(node, key);
    if (!v.IsDefined()) continue;
    double d = 0;
    if (!ValueTraits<double>::parse(v, d) || !std::isfinite(d)) {
      issues.add(path + "." + key, v, "expected a number, got '" + yaml_text(v) + "'");
      continue;
    }
    if (p.type == "int" && !integral(d)) {
      issues.add(path + "." + key, v, "an int dimension takes integers, got " + yaml_text(v));
      continue;
    }
    given[key] = d;
  }
  if (YAML::Node v = lookup(node, "log"); v.IsDefined() && !ValueTraits<bool>::parse(v, p.log))
    issues.add(path + ".log", v, "expected true or false, got '" + yaml_text(v) + "'");
  for (const auto& key : {"low", "high"})
    if (!lookup(node, key).IsDefined()) issues.add(path + "." + key, node, "required for a " + p.type + " dimension");
  if (!given.count("low") || !given.count("high")) return;
  p.low = given["low"];
  p.high = given["high"];
  if (p.low > p.high)
    issues.add(path + ".low", lookup(node, "low"), "low (" + yaml_text(lookup(node, "low")) + ") is above high (" +
                                                       yaml_text(lookup(node, "high")) + ")");
  if (p.log && p.low <= 0)
    issues.add(path + ".low", lookup(node, "low"), "log: true needs low > 0 (Optuna samples the logarithm), got " +
                                                       yaml_text(lookup(node, "low")));
  if (p.log && p.type == "int" && p.low < 1)
    issues.add(path + ".low", lookup(node, "low"), "an int dimension with log: true needs low >= 1");
  if (given.count("step")) {
    p.step = given["step"];
    if (*p.step <= 0) issues.add(path + ".step", lookup(node, "step"), "step must be > 0");
    if (p.log && !(p.type == "int" && *p.step == 1))
      issues.add(path + ".step", lookup(node, "step"), "step and log: true cannot be combined (Optuna refuses it)");
  }
}

SearchParam parse_param(const std::string& name, const YAML::Node& name_node, const YAML::Node& node, Issues& issues,
                        const std::function<std::string(const std::string&)>& key_of) {
  const std::string path = "search." + name;
  SearchParam p;
  p.name = name;
  p.where = issues.where(path, name_node);
  if (name.find('.') != std::string::npos) {
    p.key = name;
  } else {
    p.key = key_of(name);
    if (p.key.empty())
      issues.add(path, name_node, "'" + name + "' is no option of any section; give the dotted spec key (section.option)");
  }
  if (!node.IsMap()) {
    issues.add(path, node, "expected {type: float | int | categorical, ...}");
    return p;
  }
  const std::vector<std::string> types = {"float", "int", "categorical"};
  YAML::Node type = lookup(node, "type");
  if (!type.IsDefined() || !type.IsScalar()) {
    issues.add(path + ".type", type.IsDefined() ? type : node, "required: float, int or categorical");
    return p;
  }
  p.type = type.Scalar();
  if (std::find(types.begin(), types.end(), p.type) == types.end()) {
    issues.add(path + ".type", type, "'" + p.type + "' is not float, int or categorical" + did_you_mean(p.type, types));
    return p;
  }
  const std::vector<std::string> keys =
      p.type == "categorical" ? std::vector<std::string>{"type", "choices"} : std::vector<std::string>{"type", "low", "high", "log", "step"};
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      issues.add(path + "." + key, kv.first, "unknown key of a " + p.type + " dimension" + did_you_mean(key, keys));
  }
  if (p.type != "categorical") {
    check_numeric(node, path, p, issues);
    return p;
  }
  YAML::Node choices = lookup(node, "choices");
  if (!choices.IsDefined() || !choices.IsSequence() || choices.size() == 0) {
    issues.add(path + ".choices", choices.IsDefined() ? choices : node, "required: a non-empty list of values");
    return p;
  }
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (!choices[i].IsScalar() && !choices[i].IsNull()) {
      issues.add(path + ".choices[" + std::to_string(i) + "]", choices[i], "a choice is a single value (number, string, boolean or null)");
      continue;
    }
    nlohmann::json v = choice_value(choices[i]);
    for (const auto& earlier : p.choices)
      if (earlier == v) issues.add(path + ".choices[" + std::to_string(i) + "]", choices[i], "repeats an earlier choice");
    p.choices.push_back(v);
  }
  return p;
}

template <class S>
nlohmann::json options_json(const S& s) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& kv : schema_of<S>().dump(s)) {
    if (kv.second.IsNull()) continue;
    const std::string key = kv.first.Scalar();
    if (key == "type")
      j[key] = kv.second.Scalar();
    else
      j[key] = kv.second.template as<int64_t>();
  }
  return j;
}

}  // namespace

void SamplerArgs::declare(Schema<SamplerArgs>& s) {
  s.add("type", &SamplerArgs::type, "Optuna sampler: tpe (TPESampler), random (RandomSampler), cmaes (CmaEsSampler).")
      .choices(names_of(kSamplerOptions));
  s.add("seed", &SamplerArgs::seed, "The sampler's seed (null = Optuna's random seed).");
  s.add("n_startup_trials", &SamplerArgs::n_startup_trials, "tpe / cmaes: random trials before the model is used "
                                                            "(null = Optuna's default, 10 for tpe).")
      .check([](const std::optional<int64_t>& v) { return v && *v < 0 ? std::string("must be >= 0") : std::string(); });
}

void PrunerArgs::declare(Schema<PrunerArgs>& s) {
  s.add("type", &PrunerArgs::type, "Optuna pruner: median (MedianPruner), hyperband (HyperbandPruner), "
                                   "successive_halving (SuccessiveHalvingPruner), none (NopPruner).")
      .choices(names_of(kPrunerOptions));
  auto non_negative = [](const std::optional<int64_t>& v) { return v && *v < 0 ? std::string("must be >= 0") : std::string(); };
  auto positive = [](const std::optional<int64_t>& v) { return v && *v < 1 ? std::string("must be >= 1") : std::string(); };
  s.add("n_startup_trials", &PrunerArgs::n_startup_trials, "median: trials completed before any is pruned (Optuna: 5).").check(non_negative);
  s.add("n_warmup_steps", &PrunerArgs::n_warmup_steps, "median: steps of a trial before it may be pruned (Optuna: 0).").check(non_negative);
  s.add("interval_steps", &PrunerArgs::interval_steps, "median: steps between pruning checks (Optuna: 1).").check(positive);
  s.add("min_resource", &PrunerArgs::min_resource, "hyperband / successive_halving: the smallest budget, in "
                                                   "steps, a trial gets (Optuna: 1 / auto).").check(positive);
  s.add("max_resource", &PrunerArgs::max_resource, "hyperband: the largest budget in steps (null = auto: the "
                                                   "last step of the first completed trial).").check(positive);
  s.add("reduction_factor", &PrunerArgs::reduction_factor, "hyperband / successive_halving: 1 / the share of "
                                                           "trials that go on at each rung (Optuna: 3 / 4).")
      .check([](const std::optional<int64_t>& v) { return v && *v < 2 ? std::string("must be >= 2") : std::string(); });
  s.add("min_early_stopping_rate", &PrunerArgs::min_early_stopping_rate, "successive_halving: the first rung's "
                                                                         "exponent (Optuna: 0).").check(non_negative);
}

nlohmann::json SearchArgs::sampler_json() const { return options_json(sampler); }
nlohmann::json SearchArgs::pruner_json() const { return options_json(pruner); }

std::string SearchParam::override_text(const nlohmann::json& value) {
  if (value.is_string()) {
    std::string q = "\"";
    for (char c : value.get<std::string>()) q += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    return q + "\"";
  }
  if (value.is_number_float()) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", value.get<double>());
    return buf;
  }
  return value.dump();  // integers, booleans, null
}

nlohmann::json SearchParam::to_json() const {
  nlohmann::json j = {{"name", name}, {"type", type}};
  if (type == "categorical") {
    j["choices"] = choices;
    return j;
  }
  if (type == "int") {
    j["low"] = static_cast<int64_t>(low);
    j["high"] = static_cast<int64_t>(high);
    j["step"] = static_cast<int64_t>(step.value_or(1));
  } else {
    j["low"] = low;
    j["high"] = high;
    j["step"] = step ? nlohmann::json(*step) : nlohmann::json(nullptr);
  }
  j["log"] = log;
  return j;
}

void parse_search_section(const YAML::Node& node, Issues& issues,
                          const std::function<std::string(const std::string&)>& key_of, SearchArgs& out) {
  if (!node.IsMap()) {
    issues.add("search", node, "expected a mapping of dimensions (name: {type: ...}) and optionally sampler / pruner");
    return;
  }
  for (const auto& kv : node) {
    const std::string name = kv.first.Scalar();
    if (name == "sampler") {
      parse_choice(kv.second, "search.sampler", kSamplerOptions, issues, out.sampler);
    } else if (name == "pruner") {
      parse_choice(kv.second, "search.pruner", kPrunerOptions, issues, out.pruner);
    } else {
      SearchParam p = parse_param(name, kv.first, kv.second, issues, key_of);
      for (const auto& other : out.space)
        if (!p.key.empty() && other.key == p.key)
          issues.add("search." + name, kv.first, "sets " + p.key + ", as search." + other.name + " does");
      out.space.push_back(std::move(p));
    }
  }
  if (out.space.empty()) issues.add("search", node, "names no dimension to search");
}

}  // namespace hftrain
