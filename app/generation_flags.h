// The `generation` options as flags of one subcommand (eval, predict): --num-beams 4 = --set
// generation.num_beams=4, as HF's evaluate(num_beams=...) / predict(max_length=...). Taken from the section's
// one declaration, so the spec validates each value as any other.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace hftrain {

class GenerationFlags {
 public:
  explicit GenerationFlags(CLI::App& command);
  GenerationFlags(const GenerationFlags&) = delete;  // CLI11 holds references into values_
  GenerationFlags& operator=(const GenerationFlags&) = delete;

  bool any_given() const;
  // Each given flag as the override generation.<name>=<value>.
  void append_overrides(std::vector<std::string>& overrides) const;

 private:
  std::vector<std::pair<std::string, std::string>> values_;  // option name, value as given
  std::vector<CLI::Option*> options_;
};

}  // namespace hftrain
