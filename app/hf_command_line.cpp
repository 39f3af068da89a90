// HF-style command lines turned into hftrain's own (see hf_command_line.h).
#include "hf_command_line.h"

#include <cstdlib>
#include <optional>

#include "runspec/hf_flags.h"

namespace hftrain {

std::vector<std::string> adapt_hf_command_line(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> words(argv + 1, argv + argc);
  if (std::optional<int> local_rank = take_local_rank_flag(words)) {
    const auto env = [](const std::string& name) -> std::optional<std::string> {
      const char* v = std::getenv(name.c_str());
      return v ? std::optional<std::string>(v) : std::nullopt;
    };
    if (std::optional<int> exported = check_local_rank_flag(*local_rank, env))
      setenv("LOCAL_RANK", std::to_string(*exported).c_str(), 1);
  }
  // The subcommand: the first word that names one. Only commands that read a spec (they have --set) take
  // HF flags.
  std::size_t at = 0;
  const CLI::App* command = nullptr;
  for (; at < words.size() && !command; ++at) {
    if (words[at].rfind("-", 0) == 0) continue;
    try {
      command = app.get_subcommand(words[at]);
    } catch (const CLI::OptionNotFound&) {
    }
  }
  if (!command || !command->get_option_no_throw("--set")) return words;
  std::vector<std::string> rest(words.begin() + static_cast<std::ptrdiff_t>(at), words.end());
  for (auto& word : rest) {  // --nproc_per_node = --nproc-per-node
    if (word == "--") break;
    if (word.rfind("--", 0) != 0 || word.find('_') == std::string::npos) continue;
    const std::size_t eq = word.find('=');
    std::string flag = word.substr(0, eq);
    if (command->get_option_no_throw(flag)) continue;
    for (char& c : flag)
      if (c == '_') c = '-';
    if (command->get_option_no_throw(flag)) word = flag + (eq == std::string::npos ? "" : word.substr(eq));
  }
  rest = rewrite_hf_flags(rest, [command](const std::string& flag) { return command->get_option_no_throw(flag) != nullptr; });
  words.resize(at);
  words.insert(words.end(), rest.begin(), rest.end());
  return words;
}

}  // namespace hftrain
