// `hftrain components` and the exit path after an error, shared by every command.
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "builtins/register_builtins.h"
#include "commands/commands.h"
#include "distributed/comm.h"
#include "runspec/hf_names.h"

namespace hftrain {

int finish_after_error(int exit_code) {
  if (world().world_size() > 1) {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    std::_Exit(exit_code);
  }
  return exit_code;
}

int run_components() {
  const Components& c = builtin_components();
  for (const RegistryBase* r : {static_cast<const RegistryBase*>(&c.models), static_cast<const RegistryBase*>(&c.data),
                                static_cast<const RegistryBase*>(&c.optimizers),
                                static_cast<const RegistryBase*>(&c.schedulers),
                                static_cast<const RegistryBase*>(&c.metrics)}) {
    std::cout << r->kind() << ":\n";
    for (const auto& name : r->names()) {
      std::cout << "  " << name << " - " << r->description(name) << "\n";
      for (const auto& o : r->options(name))
        std::cout << "      " << o.name << " (" << o.type << ", default " << o.default_text << "): " << o.help << "\n";
    }
  }
  std::cout << "peft (PEFT LoraConfig; docs/peft.md):\n";
  for (const auto& o : schema_of<PeftArgs>().describe())
    std::cout << "      " << o.name << " (" << o.type << ", default " << o.default_text << "): " << o.help << "\n";
  std::cout << "HF TrainingArguments names accepted in training:\n";
  for (const auto& o : hf_training_names()) std::cout << "  " << o.name << " (" << o.type << "): " << o.help << "\n";
  return 0;
}

}  // namespace hftrain
