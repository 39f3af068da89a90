// Registry<Product, Args...>: component name -> {one-line description, option schema, factory}.
// Components are registered explicitly from register_builtins() (no static self-registration, which
// static linking silently drops). A component type Impl provides:
//   struct Impl::Options { static void declare(Schema<Options>&); ... };
//   Impl(const Impl::Options&, Args...)    // constructor used by the factory
// RegistryBase is the type-erased view that run-spec validation and `hftrain components` use.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "config/schema.h"
#include "util/error.h"

namespace hftrain {

// Parsed, validated options of one component, type-erased. Only the component's factory reads them.
using OptionsPtr = std::shared_ptr<const void>;

class RegistryBase {
 public:
  explicit RegistryBase(std::string kind) : kind_(std::move(kind)) {}
  virtual ~RegistryBase() = default;

  const std::string& kind() const { return kind_; }
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return entries_.count(name) > 0; }
  const std::string& description(const std::string& name) const { return entry(name).description; }
  const std::vector<OptionInfo>& options(const std::string& name) const { return entry(name).options; }

  // Validates `node` as the options of component `name` (keys in `reserved` are skipped); problems go to
  // `issues`. Unknown keys that belong to a sibling component are reported as such.
  OptionsPtr parse(const std::string& name, const YAML::Node& node, const std::string& path, Issues& issues,
                   const std::vector<std::string>& reserved) const;
  YAML::Node dump(const std::string& name, const OptionsPtr& options) const { return entry(name).dump(options.get()); }

  // "unknown <kind> 'x' (did you mean 'y'?); valid: a, b, c"
  std::string unknown_message(const std::string& name) const;

 protected:
  struct Entry {
    std::string description;
    std::vector<OptionInfo> options;
    std::vector<std::string> option_names;
    std::function<OptionsPtr(const YAML::Node&, const std::string&, Issues&, const std::vector<std::string>&,
                             const std::function<std::string(const std::string&)>&)>
        parse;
    std::function<YAML::Node(const void*)> dump;
  };
  void add_entry(const std::string& name, Entry entry);
  const Entry& entry(const std::string& name) const;

 private:
  std::string kind_;
  std::map<std::string, Entry> entries_;
};

// A product family may declare what its implementations can do: `using Traits = ...;` in the product and a
// `static constexpr Traits kTraits` in each implementation (e.g. OptimizerTraits). The registry then keeps
// each registered name's traits, so capabilities are declared once, by the implementation.
template <class Product, class = void>
struct TraitsOf {
  using type = void;
};
template <class Product>
struct TraitsOf<Product, std::void_t<typename Product::Traits>> {
  using type = typename Product::Traits;
};

// A product family may also declare facts that follow from an implementation's options: `using Facts = ...;`
// in the product and `static Facts facts(const Options&)` in each implementation (e.g. a model's hidden
// size). The registry keeps each registered name's function, so nothing reads them from option names.
template <class Product, class = void>
struct FactsOf {
  using type = void;
};
template <class Product>
struct FactsOf<Product, std::void_t<typename Product::Facts>> {
  using type = typename Product::Facts;
};

template <class Product, class... Args>
class Registry : public RegistryBase {
 public:
  using RegistryBase::RegistryBase;
  using Traits = typename TraitsOf<Product>::type;
  using Facts = typename FactsOf<Product>::type;

  template <class Impl>
  void add(const std::string& name, const std::string& description) {
    using Options = typename Impl::Options;
    const Schema<Options>& schema = schema_of<Options>();
    Entry e;
    e.description = description;
    e.options = schema.describe();
    e.option_names = schema.names();
    e.parse = [&schema](const YAML::Node& node, const std::string& path, Issues& issues,
                        const std::vector<std::string>& reserved,
                        const std::function<std::string(const std::string&)>& hint) -> OptionsPtr {
      auto opts = std::make_shared<Options>();
      schema.parse(node, path, *opts, issues, reserved, hint);
      return opts;
    };
    e.dump = [&schema](const void* p) { return schema.dump(*static_cast<const Options*>(p)); };
    add_entry(name, std::move(e));
    if constexpr (!std::is_void_v<Traits>) traits_[name] = Impl::kTraits;
    if constexpr (!std::is_void_v<Facts>)
      facts_[name] = [](const void* p) -> Facts { return Impl::facts(*static_cast<const Options*>(p)); };
    factories_[name] = [](const void* p, Args... args) -> std::unique_ptr<Product> {
      return std::make_unique<Impl>(*static_cast<const Options*>(p), std::forward<Args>(args)...);
    };
  }

  // Builds component `name` from options produced by parse(); defaults when `options` is null.
  std::unique_ptr<Product> build(const std::string& name, OptionsPtr options, Args... args) const {
    if (!options) {
      Issues issues("<defaults>");
      options = parse(name, YAML::Node(), kind(), issues, {});
      issues.throw_if_any();
    }
    auto it = factories_.find(name);
    if (it == factories_.end()) throw ConfigError(unknown_message(name));
    return it->second(options.get(), std::forward<Args>(args)...);
  }

  // The traits the implementation registered as `name` declared (unknown name: ConfigError).
  template <class T = Traits>
  const T& traits(const std::string& name) const {
    auto it = traits_.find(name);
    if (it == traits_.end()) throw ConfigError(unknown_message(name));
    return it->second;
  }
  // The facts implementation `name` declares for these options (parsed by parse(); defaults when null).
  template <class F = Facts>
  F facts(const std::string& name, OptionsPtr options) const {
    auto it = facts_.find(name);
    if (it == facts_.end()) throw ConfigError(unknown_message(name));
    if (!options) {
      Issues issues("<defaults>");
      options = parse(name, YAML::Node(), kind(), issues, {});
      issues.throw_if_any();
    }
    return it->second(options.get());
  }
  // The registered names whose traits satisfy `pred`, in name order.
  template <class Pred>
  std::vector<std::string> names_where(Pred pred) const {
    std::vector<std::string> out;
    for (const auto& [name, t] : traits_)
      if (pred(t)) out.push_back(name);
    return out;
  }

 private:
  std::map<std::string, std::function<std::unique_ptr<Product>(const void*, Args...)>> factories_;
  std::map<std::string, std::conditional_t<std::is_void_v<Traits>, char, Traits>> traits_;
  std::map<std::string, std::function<std::conditional_t<std::is_void_v<Facts>, char, Facts>(const void*)>> facts_;
};

}  // namespace hftrain
