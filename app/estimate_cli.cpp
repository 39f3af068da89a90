// `hftrain estimate`: its command-line options and the EstimateRequest they make.
#include "cli_command.h"
#include "commands/estimate.h"

namespace hftrain {
namespace {

class EstimateCli : public CliCommand {
 public:
  explicit EstimateCli(CLI::App& app)
      : CliCommand(app.add_subcommand("estimate", "Per-rank memory of a run for every ZeRO stage, precision and offload, before launch")
                       ->footer("Example:\n  hftrain estimate configs/quickstart.yaml --nproc-per-node 8 --memory-per-rank 24GiB")) {
    command_->add_option("spec", request_.spec_path, "Run spec (YAML or JSON)")->required();
    command_->add_option("--set", request_.overrides, "Override a spec value: dotted.key=value (repeatable)");
    command_->add_option("--nproc-per-node", request_.nproc_per_node,
                         "Workers per node, or auto = one per visible GPU (1 on the CPU); default distributed.nproc_per_node")
        ->check(worker_count(true));
    command_->add_option("--nnodes", request_.nnodes, "Nodes in the job")->check(CLI::PositiveNumber);
    command_->add_option("--memory-per-rank", request_.memory_per_rank,
                         "Memory one worker may use (24GiB, 16GB, ...); default this machine's available memory / "
                         "local workers");
    command_->add_flag("--json", request_.json, "Print the estimate as JSON");
  }

  int run() override { return run_estimate(request_); }

 private:
  EstimateRequest request_;
};

}  // namespace

std::unique_ptr<CliCommand> declare_estimate_command(CLI::App& app) { return std::make_unique<EstimateCli>(app); }

}  // namespace hftrain
