// Which kernel table (one per instruction set: the optimizer updates', the attention's) a kernel family runs:
// the best one this CPU runs, unless an environment variable names another, or a test forces one. Each
// family keeps one TableChoice over its tables, best first; a table is anything with a `name`.
#pragma once

#include <atomic>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "kernels/cpu_features.h"
#include "util/error.h"

namespace hftrain {
namespace simd {

template <class Table>
class TableChoice {
 public:
  // `candidates` returns the family's tables, best first (nullptr for one not compiled in); `env` names the
  // variable that picks one; `what` names the family in messages.
  TableChoice(std::function<std::vector<const Table*>()> candidates, const char* env, std::string what)
      : candidates_(std::move(candidates)), env_(env), what_(std::move(what)) {}

  std::vector<const Table*> available() const {
    std::vector<const Table*> out;
    for (const Table* t : candidates_())
      if (t != nullptr && cpu_runs(t->name)) out.push_back(t);
    return out;
  }

  const Table* find(const std::string& name) const {
    const std::string wanted = name == "avx2" ? "avx2+fma" : name;
    for (const Table* t : available())
      if (wanted == t->name) return t;
    return nullptr;
  }

  const Table* current() {
    const Table* t = forced_.load(std::memory_order_relaxed);
    if (t != nullptr) return t;
    const Table* chosen = automatic_.load(std::memory_order_acquire);
    if (chosen == nullptr) {
      chosen = available().front();
      const char* env = std::getenv(env_);
      if (env != nullptr && *env != '\0') {
        if (const Table* named = find(env)) chosen = named;
        else std::cerr << "warning: " << env_ << "=" << env << " is not available on this CPU or build; using "
                       << chosen->name << std::endl;
      }
      automatic_.store(chosen, std::memory_order_release);
    }
    return chosen;
  }

  // Forces one table by name ("" = automatic again).
  void force(const std::string& name) {
    if (name.empty()) {
      forced_.store(nullptr);
      return;
    }
    const Table* t = find(name);
    if (t == nullptr) throw RuntimeFailure(what_ + ": instruction set '" + name + "' is not available here");
    forced_.store(t);
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const Table* t : available()) out.push_back(t->name);
    return out;
  }

 private:
  std::function<std::vector<const Table*>()> candidates_;
  const char* env_;
  std::string what_;
  std::atomic<const Table*> forced_{nullptr}, automatic_{nullptr};
};

}  // namespace simd
}  // namespace hftrain
