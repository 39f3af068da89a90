// The globals of HF's chat-template environment: jinja2's sandboxed range (at most 100000 items),
// namespace and dict, and transformers' raise_exception(message) and strftime_now(format).
#include <ctime>

#include "jinja/arguments.h"
#include "jinja/error.h"
#include "jinja/renderer.h"

namespace hftrain::jinja {
namespace {

constexpr int64_t kMaxRange = 100000;

Value range(Renderer&, CallArgs& args) {
  if (!args.keywords.empty()) throw Problem("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) throw Problem("range expected 1 to 3 arguments, got " + std::to_string(p.size()));
  int64_t start = 0, stop = 0, step = 1;
  if (p.size() == 1) {
    stop = int_argument(p[0], "range's argument");
  } else {
    start = int_argument(p[0], "range's start");
    stop = int_argument(p[1], "range's stop");
    if (p.size() == 3) step = int_argument(p[2], "range's step");
  }
  if (step == 0) throw Problem("range() arg 3 must not be zero");
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(items.size()) >= kMaxRange)
      throw Problem("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    items.emplace_back(i);
  }
  std::string text = "range(" + std::to_string(start) + ", " + std::to_string(stop);
  if (step != 1) text += ", " + std::to_string(step);
  return Value::list(std::move(items), Value::Shape::Range, text + ")");
}

// namespace(mapping?, **attributes) / dict(mapping?, **items).
std::shared_ptr<DictData> mapping_of(const CallArgs& args, const char* what) {
  auto d = std::make_shared<DictData>();
  if (args.positional.size() > 1) throw Problem(std::string(what) + " takes at most one positional argument");
  if (!args.positional.empty()) {
    const Value& init = args.positional[0];
    if (init.is_dict()) {
      *d = init.dict_data();
    } else {
      for (const Value& pair : iterate(init)) {
        const auto kv = iterate(pair);
        if (kv.size() != 2) throw Problem(std::string(what) + "'s sequence items must be pairs");
        d->set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [key, value] : args.keywords) d->set(Value(key), value);
  return d;
}

Value strftime_now(Renderer&, CallArgs& args) {
  Arguments a("strftime_now()", args, {"format"});
  const std::string& format = string_argument(a.get(0), "strftime_now's format");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::string buffer(64 + format.size() * 8, '\0');
  const size_t n = std::strftime(buffer.data(), buffer.size(), format.c_str(), &local);
  buffer.resize(n);
  return Value(std::move(buffer));
}

}  // namespace

std::shared_ptr<Scope> make_global_scope() {
  auto scope = std::make_shared<Scope>();
  scope->set("range", Value::function("range", range));
  scope->set("namespace", Value::function("namespace", [](Renderer&, CallArgs& args) {
               return Value::name_space(mapping_of(args, "namespace()"));
             }));
  scope->set("dict", Value::function("dict", [](Renderer&, CallArgs& args) { return Value::dict(mapping_of(args, "dict()")); }));
  scope->set("raise_exception", Value::function("raise_exception", [](Renderer&, CallArgs& args) -> Value {
               Arguments a("raise_exception()", args, {"message"});
               throw Problem(to_str(a.get(0)));
             }));
  scope->set("strftime_now", Value::function("strftime_now", strftime_now));
  return scope;
}

}  // namespace hftrain::jinja
