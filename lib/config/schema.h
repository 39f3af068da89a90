// Declare-once option schemas. A section struct S declares each option exactly once:
//   schema.add("learning_rate", &TrainingArgs::learning_rate, "Initial learning rate.").greater_than(0);
// and the schema then parses + validates YAML into S (reporting every problem to Issues with
// file:line:col and "did you mean"), dumps S back to YAML (for --dump-config and the saved spec) and
// describes the options (for `hftrain components` and docs). No LibTorch here.
#pragma once

#include <charconv>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/issues.h"

namespace hftrain {

struct OptionInfo {
  std::string name;
  std::string type;
  std::string default_text;
  std::string help;
};

// ---- Value conversions ---------------------------------------------------------------------------
template <class V>
struct ValueTraits;

template <>
struct ValueTraits<bool> {
  static std::string name() { return "bool"; }
  static bool parse(const YAML::Node& n, bool& out) {
    if (!n.IsScalar()) return false;
    try { out = n.as<bool>(); return true; } catch (const YAML::Exception&) { return false; }
  }
  static YAML::Node dump(bool v) { return YAML::Node(v); }
};

template <>
struct ValueTraits<int64_t> {
  static std::string name() { return "integer"; }
  static bool parse(const YAML::Node& n, int64_t& out) {
    if (!n.IsScalar()) return false;
    try { out = n.as<int64_t>(); return true; } catch (const YAML::Exception&) { return false; }
  }
  static YAML::Node dump(int64_t v) { return YAML::Node(v); }
};

template <>
struct ValueTraits<double> {
  static std::string name() { return "number"; }
  static bool parse(const YAML::Node& n, double& out) {
    if (!n.IsScalar()) return false;
    try { out = n.as<double>(); } catch (const YAML::Exception&) { return false; }
    return std::isfinite(out) || n.Scalar() == ".inf" || n.Scalar() == "-.inf";
  }
  // The shortest decimal that reads back as the same double (0.003, not 0.0030000000000000001).
  static YAML::Node dump(double v) {
    if (std::isinf(v)) return YAML::Node(v > 0 ? ".inf" : "-.inf");
    if (std::isnan(v)) return YAML::Node(".nan");
    char buf[32];
    const auto end = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general).ptr;  // 0.0001, 1e-08
    return YAML::Node(std::string(buf, end));
  }
};

template <>
struct ValueTraits<std::string> {
  static std::string name() { return "string"; }
  static bool parse(const YAML::Node& n, std::string& out) {
    if (!n.IsScalar()) return false;
    out = n.Scalar();
    return true;
  }
  static YAML::Node dump(const std::string& v) { return YAML::Node(v); }
};

template <class E>
struct ValueTraits<std::vector<E>> {
  static std::string name() { return "list of " + ValueTraits<E>::name(); }
  static bool parse(const YAML::Node& n, std::vector<E>& out) {
    if (!n.IsSequence()) return false;
    out.clear();
    for (const auto& item : n) {
      E e{};
      if (!ValueTraits<E>::parse(item, e)) return false;
      out.push_back(e);
    }
    return true;
  }
  static YAML::Node dump(const std::vector<E>& v) {
    YAML::Node n(YAML::NodeType::Sequence);
    for (const auto& e : v) n.push_back(ValueTraits<E>::dump(e));
    return n;
  }
};

template <class E>
struct ValueTraits<std::optional<E>> {
  static std::string name() { return ValueTraits<E>::name() + " or null"; }
  static bool parse(const YAML::Node& n, std::optional<E>& out) {
    if (n.IsNull()) {
      out.reset();
      return true;
    }
    E e{};
    if (!ValueTraits<E>::parse(n, e)) return false;
    out = e;
    return true;
  }
  static YAML::Node dump(const std::optional<E>& v) { return v ? ValueTraits<E>::dump(*v) : YAML::Node(YAML::NodeType::Null); }
};

// ---- Paths in a saved spec ----------------------------------------------------------------------
// Options declared with .path() name input files or directories, relative to the working directory as a
// user gives them. While a SavedSpecPaths scope lives on this thread, dump() writes each such relative
// path that exists as an absolute one, so that a saved run_spec.yaml means the same files wherever it is
// read from (`hftrain eval RUN_DIR` from another directory). Other values, and paths that do not exist
// (e.g. a tokenizer name such as `bytes`), are written as given.
class SavedSpecPaths {
 public:
  SavedSpecPaths() : previous_(active_flag()) { active_flag() = true; }
  ~SavedSpecPaths() { active_flag() = previous_; }
  SavedSpecPaths(const SavedSpecPaths&) = delete;
  SavedSpecPaths& operator=(const SavedSpecPaths&) = delete;
  static bool active() { return active_flag(); }
  // `path` as the saved spec holds it (see above).
  static std::string saved(const std::string& path) {
    if (!active() || path.empty()) return path;
    const std::filesystem::path p(path);
    std::error_code ec;
    if (p.is_absolute() || !std::filesystem::exists(p, ec)) return path;
    return std::filesystem::absolute(p, ec).lexically_normal().string();
  }

 private:
  static bool& active_flag() {
    thread_local bool active = false;
    return active;
  }
  bool previous_;
};

// ---- Fields --------------------------------------------------------------------------------------
template <class S>
class FieldBase {
 public:
  FieldBase(std::string name, std::string help) : name_(std::move(name)), help_(std::move(help)) {}
  virtual ~FieldBase() = default;
  virtual void parse(const YAML::Node& n, const std::string& path, S& out, Issues& issues) const = 0;
  virtual YAML::Node dump(const S& s) const = 0;
  virtual std::string type_name() const = 0;
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  bool required() const { return required_; }
  // The keys of a DeepSpeed config section this option is read from (Field::deepspeed); empty = none.
  const std::vector<std::string>& deepspeed_names() const { return deepspeed_names_; }

 protected:
  std::string name_;
  std::string help_;
  bool required_ = false;
  std::vector<std::string> deepspeed_names_;
};

inline std::string format_number(double v) {
  std::ostringstream ss;
  ss << v;
  return ss.str();
}

template <class S, class V>
class Field : public FieldBase<S> {
 public:
  Field(std::string name, V S::*member, std::string help)
      : FieldBase<S>(std::move(name), std::move(help)), member_(member) {}

  Field& min(double v) { min_ = v; return *this; }
  Field& max(double v) { max_ = v; return *this; }
  Field& greater_than(double v) { greater_than_ = v; return *this; }
  Field& choices(std::vector<std::string> c) { choices_ = std::move(c); return *this; }
  Field& required() { this->required_ = true; return *this; }
  // The option is also a key of a DeepSpeed config section: `names` are DeepSpeed's name for it and the
  // aliases DeepSpeed accepts (zero_optimization's param_persistence_threshold for
  // stage3_param_persistence_threshold); runspec/deepspeed_reader places such a key here.
  Field& deepspeed(std::vector<std::string> names) {
    this->deepspeed_names_ = std::move(names);
    return *this;
  }
  // An input file or directory (see SavedSpecPaths).
  Field& path() {
    static_assert(std::is_same_v<V, std::string>, "path() is for string options");
    path_ = true;
    return *this;
  }
  // Extra rule: returns an error message, or "" when the value is fine.
  Field& check(std::function<std::string(const V&)> rule) { rule_ = std::move(rule); return *this; }

  void parse(const YAML::Node& n, const std::string& path, S& out, Issues& issues) const override {
    V value{};
    if (!ValueTraits<V>::parse(n, value)) {
      issues.add(path, n, "expected " + ValueTraits<V>::name() + ", got " + describe(n));
      return;
    }
    std::string problem = validate(value);
    if (!problem.empty()) {
      issues.add(path, n, problem);
      return;
    }
    out.*member_ = value;
  }

  YAML::Node dump(const S& s) const override {
    if constexpr (std::is_same_v<V, std::string>) {
      if (path_) return ValueTraits<V>::dump(SavedSpecPaths::saved(s.*member_));
    }
    return ValueTraits<V>::dump(s.*member_);
  }
  std::string type_name() const override {
    if (!choices_.empty()) {
      std::string t = "one of";
      for (const auto& c : choices_) t += " " + c;
      return t;
    }
    return ValueTraits<V>::name();
  }

 private:
  static std::string describe(const YAML::Node& n) {
    if (n.IsMap()) return "a mapping";
    if (n.IsSequence()) return "a list";
    if (n.IsNull()) return "nothing";
    return "'" + n.Scalar() + "'";
  }

  template <class T>
  struct OptionalNumber : std::false_type {};
  template <class T>
  struct OptionalNumber<std::optional<T>> : std::bool_constant<std::is_arithmetic_v<T> && !std::is_same_v<T, bool>> {};

  std::string validate(const V& value) const {
    if constexpr (OptionalNumber<V>::value) {  // null passes; a given value meets the bounds
      if (value)
        if (std::string problem = check_bounds(static_cast<double>(*value)); !problem.empty()) return problem;
    }
    if constexpr (std::is_arithmetic_v<V> && !std::is_same_v<V, bool>) {
      if (std::string problem = check_bounds(static_cast<double>(value)); !problem.empty()) return problem;
    }
    if constexpr (std::is_same_v<V, std::string>) {
      if (!choices_.empty()) {
        bool ok = false;
        for (const auto& c : choices_) ok = ok || c == value;
        if (!ok) {
          std::string list;
          for (const auto& c : choices_) list += (list.empty() ? "" : ", ") + c;
          return "'" + value + "' is not one of: " + list + did_you_mean(value, choices_);
        }
      }
    }
    if (rule_) return rule_(value);
    return "";
  }

  std::string check_bounds(double d) const {
    if (min_ && d < *min_) return "must be >= " + format_number(*min_) + ", got " + format_number(d);
    if (max_ && d > *max_) return "must be <= " + format_number(*max_) + ", got " + format_number(d);
    if (greater_than_ && !(d > *greater_than_)) return "must be > " + format_number(*greater_than_) + ", got " + format_number(d);
    return "";
  }

  V S::*member_;
  std::optional<double> min_, max_, greater_than_;
  std::vector<std::string> choices_;
  std::function<std::string(const V&)> rule_;
  bool path_ = false;
};

template <class S>
class Schema;
template <class S>
const Schema<S>& schema_of();

// A nested section: a mapping parsed with V's own schema (V::declare). When `shorthand` names one of V's
// options, a scalar stands for that option alone (DeepSpeed's `offload_optimizer: cpu` shorthand).
template <class S, class V>
class SectionField : public FieldBase<S> {
 public:
  SectionField(std::string name, V S::*member, std::string help, std::string shorthand)
      : FieldBase<S>(std::move(name), std::move(help)), member_(member), shorthand_(std::move(shorthand)) {}

  void parse(const YAML::Node& n, const std::string& path, S& out, Issues& issues) const override {
    if (n.IsScalar() && !shorthand_.empty()) {
      YAML::Node m(YAML::NodeType::Map);
      m[shorthand_] = n;
      schema_of<V>().parse(m, path, out.*member_, issues);
      return;
    }
    schema_of<V>().parse(n, path, out.*member_, issues);
  }
  YAML::Node dump(const S& s) const override { return schema_of<V>().dump(s.*member_); }
  std::string type_name() const override {
    return "mapping" + (shorthand_.empty() ? std::string() : " (or its " + shorthand_ + " alone)");
  }

 private:
  V S::*member_;
  std::string shorthand_;
};

// ---- Schema --------------------------------------------------------------------------------------
template <class S>
class Schema {
 public:
  // A nested section (see SectionField).
  template <class V>
  void add_section(const std::string& name, V S::*member, const std::string& help, const std::string& shorthand = "") {
    fields_.push_back(std::make_unique<SectionField<S, V>>(name, member, help, shorthand));
  }

  template <class V>
  Field<S, V>& add(const std::string& name, V S::*member, const std::string& help) {
    auto f = std::make_unique<Field<S, V>>(name, member, help);
    Field<S, V>& ref = *f;
    fields_.push_back(std::move(f));
    return ref;
  }

  std::vector<std::string> names() const {
    std::vector<std::string> n;
    for (const auto& f : fields_) n.push_back(f->name());
    return n;
  }

  // Parses `node` (a mapping, or null/undefined for all defaults) into `out`. Keys listed in
  // `reserved` (e.g. "type") are skipped. `hint(key)` may explain where an unknown key belongs.
  void parse(const YAML::Node& node, const std::string& path, S& out, Issues& issues,
             const std::vector<std::string>& reserved = {},
             const std::function<std::string(const std::string&)>& hint = nullptr) const {
    auto join = [&](const std::string& k) { return path.empty() ? k : path + "." + k; };
    if (node.IsDefined() && !node.IsNull() && !node.IsMap()) {
      issues.add(path, node, "expected a mapping of options");
      return;
    }
    if (node.IsMap()) {
      for (const auto& kv : node) {
        const std::string key = kv.first.Scalar();
        bool is_reserved = false;
        for (const auto& r : reserved) is_reserved = is_reserved || r == key;
        if (is_reserved) continue;
        const FieldBase<S>* field = find(key);
        if (!field) {
          std::string extra = hint ? hint(key) : "";
          if (extra.empty()) extra = did_you_mean(key, names());
          issues.add(join(key), kv.first, "unknown key" + extra);
          continue;
        }
        field->parse(kv.second, join(key), out, issues);
      }
    }
    for (const auto& f : fields_) {
      if (f->required() && !lookup(node, f->name()).IsDefined())
        issues.add(join(f->name()), node, "required value is missing (" + f->help() + ")");
    }
  }

  YAML::Node dump(const S& s) const {
    YAML::Node n(YAML::NodeType::Map);
    for (const auto& f : fields_) n[f->name()] = f->dump(s);
    return n;
  }

  std::vector<OptionInfo> describe() const {
    S defaults{};
    std::vector<OptionInfo> out;
    for (const auto& f : fields_) {
      YAML::Emitter e;
      e << YAML::Flow << f->dump(defaults);
      out.push_back({f->name(), f->type_name(), e.c_str(), f->help()});
    }
    return out;
  }

  const FieldBase<S>* find(const std::string& name) const {
    for (const auto& f : fields_)
      if (f->name() == name) return f.get();
    return nullptr;
  }

  // The option DeepSpeed key `key` is read into (Field::deepspeed), or null.
  const FieldBase<S>* find_deepspeed(const std::string& key) const {
    for (const auto& f : fields_)
      for (const auto& n : f->deepspeed_names())
        if (n == key) return f.get();
    return nullptr;
  }

  // Every DeepSpeed key of the schema's options, names and aliases.
  std::vector<std::string> deepspeed_names() const {
    std::vector<std::string> out;
    for (const auto& f : fields_) out.insert(out.end(), f->deepspeed_names().begin(), f->deepspeed_names().end());
    return out;
  }

 private:
  std::vector<std::unique_ptr<FieldBase<S>>> fields_;
};

// Returns the schema for S, built once from S::declare(Schema<S>&).
template <class S>
const Schema<S>& schema_of() {
  static const Schema<S> schema = [] {
    Schema<S> s;
    S::declare(s);
    return s;
  }();
  return schema;
}

}  // namespace hftrain
