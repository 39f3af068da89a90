// `hftrain components`: no options of its own.
#include "cli_command.h"
#include "commands/commands.h"

namespace hftrain {
namespace {

class ComponentsCli : public CliCommand {
 public:
  explicit ComponentsCli(CLI::App& app)
      : CliCommand(app.add_subcommand("components", "List every registered component and its options")
                       ->footer("Example:\n  hftrain components")) {}

  int run() override { return run_components(); }
};

}  // namespace

std::unique_ptr<CliCommand> declare_components_command(CLI::App& app) { return std::make_unique<ComponentsCli>(app); }

}  // namespace hftrain
