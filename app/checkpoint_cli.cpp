// `hftrain checkpoint inspect | convert`: their command-line options, handed to lib/commands.
#include "cli_command.h"
#include "commands/checkpoint_convert.h"
#include "commands/checkpoint_inspect.h"

namespace hftrain {
namespace {

class CheckpointCli : public CliCommand {
 public:
  explicit CheckpointCli(CLI::App& app)
      : CliCommand(app.add_subcommand("checkpoint", "Work with checkpoints")->require_subcommand(1)) {
    inspect_ = command_->add_subcommand("inspect", "Print a checkpoint's step, layout, precision, files and the manifest check "
                                                   "(exit 1 when it is not complete)")
                   ->footer("Example:\n  hftrain checkpoint inspect runs/x/checkpoint-500");
    inspect_->add_option("checkpoint_dir", inspect_dir_, "Checkpoint directory (checkpoint-N)")->required();
    declare_convert();
  }

  int run() override { return *inspect_ ? run_checkpoint_inspect(inspect_dir_) : run_checkpoint_convert(convert_); }

 private:
  void declare_convert() {
    CLI::App* convert = command_->add_subcommand("convert", "Re-partition a checkpoint's fp32 master weights and optimizer state "
                                                            "for another number of workers and ZeRO stage (0-2), as resume does "
                                                            "when it loads")
                            ->footer("Example:\n  hftrain checkpoint convert runs/x/checkpoint-500 --nproc-per-node 6 --stage 2 runs/x6");
    convert->add_option("checkpoint_dir", convert_.checkpoint_dir, "Checkpoint directory (checkpoint-N)")->required();
    convert->add_option("out_dir", convert_.out_dir, "Directory that receives checkpoint-N (an output_dir)")->required();
    convert->add_option("--nproc-per-node", convert_.nproc_per_node, "Workers of the new layout")
        ->required()
        ->check(worker_count(false, "the new layout is for the run that resumes it, which may see other GPUs than "
                                    "this machine; give the number of workers"));
    convert->add_option("--stage", convert_.stage, "ZeRO stage of the new layout (0, 1 or 2)")->required();
  }

  CLI::App* inspect_ = nullptr;
  std::string inspect_dir_;
  ConvertRequest convert_;
};

}  // namespace

std::unique_ptr<CliCommand> declare_checkpoint_command(CLI::App& app) { return std::make_unique<CheckpointCli>(app); }

}  // namespace hftrain
