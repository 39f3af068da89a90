// `hftrain report`: its command-line options and the ReportRequest they make.
#include "cli_command.h"
#include "commands/report.h"

namespace hftrain {
namespace {

class ReportCli : public CliCommand {
 public:
  explicit ReportCli(CLI::App& app)
      : CliCommand(app.add_subcommand("report", "Write an HTML page plotting loss, eval metrics and learning rate of runs")
                       ->footer("Example:\n  hftrain report runs/a runs/b -o compare.html")) {
    command_->add_option("run_dirs", request_.run_dirs, "Run (or checkpoint) directories holding trainer_state.json")
        ->required();
    command_->add_option("-o,--output", request_.output,
                         "Output HTML file (default: RUN_DIR/report.html for one run, ./report.html for several)");
  }

  int run() override { return run_report(request_); }

 private:
  ReportRequest request_;
};

}  // namespace

std::unique_ptr<CliCommand> declare_report_command(CLI::App& app) { return std::make_unique<ReportCli>(app); }

}  // namespace hftrain
