// `hftrain data inspect`: its command-line options, handed to lib/commands.
#include "cli_command.h"
#include "commands/data_inspect.h"

namespace hftrain {
namespace {

class DataCli : public CliCommand {
 public:
  explicit DataCli(CLI::App& app)
      : CliCommand(app.add_subcommand("data", "Look at the data a run trains on")->require_subcommand(1)) {
    CLI::App* inspect = command_->add_subcommand("inspect", "Print the first examples of a split as the run would train on "
                                                            "them: text, token ids, which tokens carry loss, packed rows' "
                                                            "boundaries")
                            ->footer("Example:\n  hftrain data inspect chat.yaml --n 2\n  hftrain data inspect chat.yaml --json");
    inspect->add_option("spec", request_.spec_path, "Run spec (YAML or JSON)")->required();
    inspect->add_option("--set", request_.overrides, "Override a spec value: section.key=value (repeatable)");
    inspect->add_option("--split", request_.split, "train, eval (validation) or test")->capture_default_str();
    inspect->add_option("--n", request_.n, "How many examples")->capture_default_str();
    inspect->add_flag("--json", request_.json, "One JSON object per example: text, input_ids, labels (-100 masked), boundaries");
  }

  int run() override { return run_data_inspect(request_); }

 private:
  DataInspectRequest request_;
};

}  // namespace

std::unique_ptr<CliCommand> declare_data_command(CLI::App& app) { return std::make_unique<DataCli>(app); }

}  // namespace hftrain
