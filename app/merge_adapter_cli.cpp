// `hftrain merge-adapter`: its command-line options and the MergeAdapterRequest they make.
#include "cli_command.h"
#include "commands/merge_adapter.h"

namespace hftrain {
namespace {

class MergeAdapterCli : public CliCommand {
 public:
  explicit MergeAdapterCli(CLI::App& app)
      : CliCommand(app.add_subcommand("merge-adapter", "Merge a PEFT LoRA / DoRA adapter into its base model and save a plain HF "
                                                       "model directory (PEFT merge_and_unload)")
                       ->footer("Example:\n  hftrain merge-adapter models/llama runs/lora models/llama-merged")) {
    command_->add_option("base_dir", request_.base_dir, "The base model's HF directory (config.json + safetensors)")->required();
    command_->add_option("adapter_dir", request_.adapter_dir, "The adapter directory (adapter_config.json + "
                                                              "adapter_model.safetensors), e.g. a run's output_dir or checkpoint")
        ->required();
    command_->add_option("out_dir", request_.out_dir, "Directory that receives the merged model")->required();
  }

  int run() override { return run_merge_adapter(request_); }

 private:
  MergeAdapterRequest request_;
};

}  // namespace

std::unique_ptr<CliCommand> declare_merge_adapter_command(CLI::App& app) { return std::make_unique<MergeAdapterCli>(app); }

}  // namespace hftrain
