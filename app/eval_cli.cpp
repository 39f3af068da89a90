// `hftrain eval`: its command-line options, handed to run_eval (lib/commands/commands.h).
#include "cli_command.h"
#include "commands/commands.h"
#include "generation_flags.h"

namespace hftrain {
namespace {

class EvalCli : public CliCommand {
 public:
  explicit EvalCli(CLI::App& app)
      : CliCommand(app.add_subcommand("eval", "Evaluate a trained or pretrained model on the eval split")
                       ->footer("Examples:\n  hftrain eval runs/quickstart\n  hftrain eval spec.yaml --model models/gpt2\n"
                                "  hftrain eval runs/t5 --num-beams 4 --max-length 64   (with training.predict_with_generate)")) {
    command_->add_option("target", target_, "Run directory or run spec")->required();
    command_->add_option("--model", model_,
                         "Model directory to evaluate (as model.from_pretrained) instead of the run's trained model");
    command_->add_option("--set", overrides_, "Override a spec value: dotted.key=value (repeatable)");
    command_->add_option("--metric-key-prefix", prefix_,
                         "Name metrics <prefix>_loss, ... and save them as <prefix>_results.json (HF metric_key_prefix)")
        ->capture_default_str();
    generation_ = std::make_unique<GenerationFlags>(*command_);
  }

  int run() override {
    generation_->append_overrides(overrides_);
    return run_eval(target_, overrides_, prefix_, model_, generation_->any_given());
  }

 private:
  std::string target_;
  std::vector<std::string> overrides_;
  std::string model_;
  std::string prefix_ = "eval";
  std::unique_ptr<GenerationFlags> generation_;  // every `generation` option as a flag
};

}  // namespace

std::unique_ptr<CliCommand> declare_eval_command(CLI::App& app) { return std::make_unique<EvalCli>(app); }

}  // namespace hftrain
