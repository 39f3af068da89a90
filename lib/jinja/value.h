// The values a chat template computes with: a small variant of Python's types as jinja2 sees them
// (undefined, None, bool, int, float, str, list / tuple / generator / dict view, insertion-ordered dict,
// namespace, callable), their Python str() / repr(), truthiness, equality and ordering, len() and iter(),
// json.dumps as HF's tojson calls it, and the conversion from JSON for the render context.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace hftrain::jinja {

class Value;
class Renderer;

// The arguments of a call: positional, then keyword in the order written.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
};
using NativeFunction = std::function<Value(Renderer&, CallArgs&)>;

struct ListData;
struct DictData;
struct CallableData;

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };
  // What a List value is in Python: list, tuple, a generator (filters' results: truthy, no len, one pass),
  // a dict view (items() / keys() / values()), or a range.
  enum class Shape { List, Tuple, Generator, View, Range };

  Value() = default;  // undefined
  Value(bool b) : kind_(Kind::Bool), b_(b) {}
  Value(int64_t i) : kind_(Kind::Int), i_(i) {}
  Value(int i) : kind_(Kind::Int), i_(i) {}
  Value(double f) : kind_(Kind::Float), f_(f) {}
  Value(std::string s) : kind_(Kind::String), s_(std::move(s)) {}
  Value(const char* s) : kind_(Kind::String), s_(s) {}

  // An undefined value; `hint` is the error its use raises ("'x' is undefined"); `unsafe` marks the
  // sandbox's refusal of a mutating method (a SecurityError in jinja2).
  static Value undefined(std::string hint, bool unsafe = false);
  static Value none();
  static Value list(std::vector<Value> items, Shape shape = Shape::List, std::string view_name = "");
  static Value tuple(std::vector<Value> items) { return list(std::move(items), Shape::Tuple); }
  static Value dict(std::shared_ptr<DictData> data);
  static Value new_dict();
  static Value name_space(std::shared_ptr<DictData> data);
  static Value function(std::string name, NativeFunction fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::Bool ? (b_ ? 1 : 0) : i_; }
  double as_float() const { return kind_ == Kind::Float ? f_ : static_cast<double>(as_int()); }
  const std::string& str() const { return s_; }  // the string, or an undefined value's hint
  bool unsafe() const { return unsafe_; }
  ListData& list_data() const { return *list_; }
  DictData& dict_data() const { return *dict_; }  // Dict and Namespace
  const CallableData& callable() const { return *fn_; }
  const std::shared_ptr<DictData>& dict_ptr() const { return dict_; }

 private:
  Kind kind_ = Kind::Undefined;
  bool b_ = false;
  bool unsafe_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<ListData> list_;
  std::shared_ptr<DictData> dict_;
  std::shared_ptr<CallableData> fn_;
};

struct ListData {
  std::vector<Value> items;
  Value::Shape shape = Value::Shape::List;
  std::string view_name;  // dict_items / dict_keys / dict_values, or a range's repr
  bool consumed = false;  // a generator iterates once
};

// Insertion-ordered mapping (keys compare as Python's do: 1 == 1.0 == True).
struct DictData {
  std::vector<std::pair<Value, Value>> entries;
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
  void set(const Value& key, Value value);
};

struct CallableData {
  std::string name;
  NativeFunction fn;
};

// Python's type name of a value ('str', 'dict', 'NoneType', ...).
std::string type_name(const Value& v);
bool truthy(const Value& v);
std::string to_str(const Value& v);  // str(v); undefined prints as ""
std::string repr(const Value& v);
std::string py_float_repr(double d);
bool equals(const Value& a, const Value& b);
// a < b as Python orders them; throws Problem when the types are not orderable.
bool less(const Value& a, const Value& b);
// len(v); throws Problem when v has none.
int64_t length(const Value& v);
// The items iter(v) yields (a generator is consumed); throws Problem when v is not iterable.
std::vector<Value> iterate(const Value& v);

struct JsonDumpOptions {
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool has_indent = false;
  std::string indent;  // the text of one level (indent=2 -> two spaces)
  std::string item_separator = ", ";
  std::string key_separator = ": ";
};
// json.dumps(v, ...) as HF's tojson calls it; throws Problem on a value JSON cannot hold.
std::string json_dumps(const Value& v, const JsonDumpOptions& options);

Value from_json(const nlohmann::ordered_json& j);
// The JSON of a value (lists, tuples, dicts with str / int / float / bool / None keys, scalars); throws
// Problem on one JSON cannot hold (undefined, a generator, a namespace, a function).
nlohmann::ordered_json to_json(const Value& v);

}  // namespace hftrain::jinja
