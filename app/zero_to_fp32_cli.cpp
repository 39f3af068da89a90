// `hftrain zero-to-fp32`: its command-line options and the ZeroToFp32Request they make.
#include "cli_command.h"
#include "commands/zero_to_fp32.h"

namespace hftrain {
namespace {

class ZeroToFp32Cli : public CliCommand {
 public:
  explicit ZeroToFp32Cli(CLI::App& app)
      : CliCommand(app.add_subcommand("zero-to-fp32", "Rebuild full fp32 weights from ZeRO checkpoint shards")
                       ->footer("Example:\n  hftrain zero-to-fp32 runs/x/checkpoint-100 runs/x/fp32 --max-shard-size 2GB")) {
    command_->add_option("checkpoint_dir", request_.checkpoint_dir, "Checkpoint directory (holding `latest`) or its global_stepN/")
        ->required();
    command_->add_option("output", request_.output, "Output directory (default: fp32-<checkpoint name> beside the checkpoint)");
    command_->add_option("--max-shard-size", request_.max_shard_size,
                         "Split model.safetensors into model-0000x-of-0000y.safetensors above this size (5GB, 500MB, 2GiB)");
  }

  int run() override { return run_zero_to_fp32(request_); }

 private:
  ZeroToFp32Request request_;
};

}  // namespace

std::unique_ptr<CliCommand> declare_zero_to_fp32_command(CLI::App& app) { return std::make_unique<ZeroToFp32Cli>(app); }

}  // namespace hftrain
