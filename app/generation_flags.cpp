// Generation options as subcommand flags (see generation_flags.h).
#include "generation_flags.h"

#include <algorithm>

#include "runspec/sections.h"

namespace hftrain {

GenerationFlags::GenerationFlags(CLI::App& command) {
  const auto infos = schema_of<GenerationArgs>().describe();
  values_.reserve(infos.size());  // the options hold references into it
  for (const auto& info : infos) {
    std::string flag = info.name;
    std::replace(flag.begin(), flag.end(), '_', '-');
    values_.emplace_back(info.name, "");
    options_.push_back(command.add_option("--" + flag, values_.back().second, info.help + " (generation." + info.name + ")")
                           ->type_name(info.type));
  }
}

bool GenerationFlags::any_given() const {
  for (const auto* o : options_)
    if (o->count() > 0) return true;
  return false;
}

void GenerationFlags::append_overrides(std::vector<std::string>& overrides) const {
  for (std::size_t i = 0; i < options_.size(); ++i)
    if (options_[i]->count() > 0) overrides.push_back("generation." + values_[i].first + "=" + values_[i].second);
}

}  // namespace hftrain
