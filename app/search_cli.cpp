// `hftrain search`: its command-line options and the SearchRequest they make (lib/commands/commands.h).
#include "cli_command.h"
#include "commands/commands.h"

namespace hftrain {
namespace {

class SearchCli : public CliCommand {
 public:
  explicit SearchCli(CLI::App& app)
      : CliCommand(app.add_subcommand("search", "Hyperparameter search with Optuna over the spec's search section; each trial "
                                                "is an hftrain train run in output_dir/trial-<n>/")
                       ->footer("Example:\n  hftrain search configs/quickstart_search.yaml --n-trials 12\n"
                                "  hftrain search spec.yaml --n-trials 20 --storage sqlite:///study.db --study-name lr   "
                                "(on each machine)")) {
    command_->add_option("spec", request_.spec_path, "Run spec (YAML or JSON) with a search section")->required();
    command_->add_option("--set", request_.overrides, "Override a spec value for every trial: dotted.key=value (repeatable)");
    command_->add_option("--n-trials", request_.n_trials, "Trials this process runs (as Optuna's optimize(n_trials))")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    command_->add_option("--storage", request_.storage,
                         "Optuna storage URL shared by cooperating processes (sqlite:///study.db, postgresql://...); "
                         "default sqlite:///<output_dir>/study.db");
    command_->add_option("--study-name", request_.study_name, "The study's name in the storage (created or continued)")
        ->default_str("hftrain-search");
    command_->add_option("--direction", request_.direction, "Whether the objective is minimized or maximized")
        ->capture_default_str()
        ->check(CLI::IsMember({"minimize", "maximize"}));
    command_->add_option("--metric", request_.metric,
                         "The evaluation metric to optimize (eval_loss, eval_accuracy, ...); default HF's objective: "
                         "eval_loss when it is the only metric, else the sum of the other metrics");
  }

  int run() override { return run_search(request_); }

 private:
  SearchRequest request_;
};

}  // namespace

std::unique_ptr<CliCommand> declare_search_command(CLI::App& app) { return std::make_unique<SearchCli>(app); }

}  // namespace hftrain
