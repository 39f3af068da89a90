// `hftrain predict`: its command-line options, handed to run_predict (lib/commands/commands.h).
#include "cli_command.h"
#include "commands/commands.h"
#include "generation_flags.h"

namespace hftrain {
namespace {

class PredictCli : public CliCommand {
 public:
  explicit PredictCli(CLI::App& app)
      : CliCommand(app.add_subcommand("predict", "Write predictions.jsonl for the test split or for a file of prompts")
                       ->footer("Examples:\n  hftrain predict runs/quickstart --set generation.max_new_tokens=6\n"
                                "  hftrain predict runs/gpt2 --prompts prompts.txt --set generation.max_new_tokens=50\n"
                                "  hftrain predict runs/x --num-beams 4 --num-return-sequences 2 --length-penalty 0.6")) {
    command_->add_option("target", target_, "Run directory or run spec")->required();
    command_->add_option("--model", model_,
                         "Model directory to predict with (as model.from_pretrained) instead of the run's trained model");
    command_->add_option("--set", overrides_, "Override a spec value: dotted.key=value (repeatable)");
    command_->add_option("--prompts", prompts_,
                         "Causal LMs: continue each prompt of this file instead of the test split: one per line "
                         "(.txt and other names) or one per row (.jsonl / .csv / .tsv, field --prompt-column); "
                         "no data file is read");
    command_->add_option("--prompt-column", prompt_column_, "--prompts jsonl / csv / tsv: the field holding the prompt")
        ->capture_default_str();
    generation_ = std::make_unique<GenerationFlags>(*command_);
  }

  int run() override {
    generation_->append_overrides(overrides_);
    return run_predict(target_, overrides_, model_, prompts_, prompt_column_);
  }

 private:
  std::string target_;
  std::vector<std::string> overrides_;
  std::string model_;
  std::string prompts_;
  std::string prompt_column_ = "text";
  std::unique_ptr<GenerationFlags> generation_;  // every `generation` option as a flag
};

}  // namespace

std::unique_ptr<CliCommand> declare_predict_command(CLI::App& app) { return std::make_unique<PredictCli>(app); }

}  // namespace hftrain
