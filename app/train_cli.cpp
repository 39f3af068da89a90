// `hftrain train`: its command-line options and the TrainRequest they make (lib/commands/commands.h).
#include "cli_command.h"
#include "commands/commands.h"

namespace hftrain {
namespace {

class TrainCli : public CliCommand {
 public:
  explicit TrainCli(CLI::App& app)
      : CliCommand(app.add_subcommand("train", "Train a model as the run spec says")
                       ->footer("Example:\n  hftrain train configs/quickstart.yaml --set training.learning_rate=3e-4")) {
    command_->add_option("spec", request_.spec_path, "Run spec (YAML or JSON)")->required();
    command_->add_option("--set", request_.overrides, "Override a spec value: dotted.key=value (repeatable)");
    command_->add_flag("--dump-config", request_.dump_config, "Print the fully resolved spec and exit");
    resume_ = command_->add_option("--resume", request_.resume,
                                   "Resume from a checkpoint directory; bare --resume = the newest complete "
                                   "checkpoint in output_dir")
                  ->expected(0, 1);
    declare_launch_options();
  }

  bool trains() const override { return true; }

  int run() override {
    if (resume_->count() > 0 && request_.resume.empty()) request_.resume = "last";
    request_.given = {nnodes_->count() > 0, node_rank_->count() > 0, master_addr_->count() > 0, master_port_->count() > 0};
    return run_train(request_);
  }

 private:
  // Data-parallel launch, torchrun's options.
  void declare_launch_options() {
    command_->add_option("--nproc-per-node", request_.nproc_per_node,
                         "Worker processes on this node (data parallel), or auto = one per visible GPU (1 on the CPU); "
                         "overrides distributed.nproc_per_node")
        ->check(worker_count(true));
    nnodes_ = command_->add_option("--nnodes", request_.nnodes, "Nodes in the job (each runs this command)")
                  ->check(CLI::PositiveNumber);
    node_rank_ = command_->add_option("--node-rank", request_.node_rank, "This node's index, 0 .. nnodes-1")
                     ->check(CLI::NonNegativeNumber);
    master_addr_ = command_->add_option("--master-addr", request_.master_addr, "Address of node 0 (rendezvous); default 127.0.0.1");
    master_port_ = command_->add_option("--master-port", request_.master_port, "Rendezvous port on node 0; default a free port (one node)")
                       ->check(CLI::Range(1, 65535));
    command_->add_option("--accelerate-config", request_.accelerate_config,
                         "An Accelerate config file (accelerate launch --config_file): its settings join the spec's "
                         "(distributed.accelerate_config); these flags win over its launch settings");
  }

  TrainRequest request_;
  CLI::Option* resume_ = nullptr;
  CLI::Option *nnodes_ = nullptr, *node_rank_ = nullptr, *master_addr_ = nullptr, *master_port_ = nullptr;
};

}  // namespace

std::unique_ptr<CliCommand> declare_train_command(CLI::App& app) { return std::make_unique<TrainCli>(app); }

}  // namespace hftrain
