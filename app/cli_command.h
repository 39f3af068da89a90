// One `hftrain <command>` on the command line: it declares its own options (CLI11) beside the code that
// hands them to lib/commands, and runs when the command line chooses it. main() only parses, runs the
// chosen command and maps its errors to exit codes. One file per command: app/<command>_cli.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace hftrain {

class CliCommand {
 public:
  // `command`: the subcommand this command declared its options on (owned by the CLI11 app).
  explicit CliCommand(CLI::App* command) : command_(command) {}
  virtual ~CliCommand() = default;
  CliCommand(const CliCommand&) = delete;  // CLI11 holds references to the members
  CliCommand& operator=(const CliCommand&) = delete;

  // Whether the parsed command line chose this command (or one of its subcommands).
  bool chosen() const { return static_cast<bool>(*command_); }
  // Training keeps freed memory for the next step; the other commands give it back (util/malloc_policy.h).
  virtual bool trains() const { return false; }
  // Runs the chosen command on the parsed options: its exit code. Errors are thrown, as lib/commands does.
  virtual int run() = 0;

 protected:
  CLI::App* command_;
};

// Every command, declared on `app` in the order `hftrain --help` lists them.
std::vector<std::unique_ptr<CliCommand>> declare_commands(CLI::App& app);

std::unique_ptr<CliCommand> declare_train_command(CLI::App& app);
std::unique_ptr<CliCommand> declare_eval_command(CLI::App& app);
std::unique_ptr<CliCommand> declare_predict_command(CLI::App& app);
std::unique_ptr<CliCommand> declare_zero_to_fp32_command(CLI::App& app);
std::unique_ptr<CliCommand> declare_merge_adapter_command(CLI::App& app);
std::unique_ptr<CliCommand> declare_estimate_command(CLI::App& app);
std::unique_ptr<CliCommand> declare_checkpoint_command(CLI::App& app);  // inspect, convert
std::unique_ptr<CliCommand> declare_components_command(CLI::App& app);
std::unique_ptr<CliCommand> declare_report_command(CLI::App& app);
std::unique_ptr<CliCommand> declare_search_command(CLI::App& app);
std::unique_ptr<CliCommand> declare_data_command(CLI::App& app);  // inspect

// --nproc-per-node: a positive integer, or `auto` (one worker per visible GPU, 1 on the CPU) where the
// command runs on this machine. Where it does not (`checkpoint convert` writes a layout for a later run),
// `auto` is refused by name, saying `why_not_auto`.
CLI::Validator worker_count(bool auto_allowed, const std::string& why_not_auto = "");

}  // namespace hftrain
