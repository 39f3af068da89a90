// The list of commands and what their declarations share (see cli_command.h).
#include "cli_command.h"

namespace hftrain {

std::vector<std::unique_ptr<CliCommand>> declare_commands(CLI::App& app) {
  std::vector<std::unique_ptr<CliCommand>> commands;
  for (auto* declare : {declare_train_command, declare_eval_command, declare_predict_command, declare_zero_to_fp32_command,
                        declare_merge_adapter_command, declare_estimate_command, declare_checkpoint_command,
                        declare_components_command, declare_report_command, declare_search_command, declare_data_command})
    commands.push_back(declare(app));
  return commands;
}

CLI::Validator worker_count(bool auto_allowed, const std::string& why_not_auto) {
  return CLI::Validator(
      [auto_allowed, why_not_auto](std::string& value) -> std::string {
        if (value == "auto") return auto_allowed ? "" : "auto is not accepted here: " + why_not_auto;
        std::size_t used = 0;
        long long n = 0;
        try {
          n = std::stoll(value, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != value.size() || n < 1)
          return "'" + value + "' is not a positive number of workers" + (auto_allowed ? " or auto" : "");
        return "";
      },
      auto_allowed ? "INT>0|auto" : "INT>0");
}

}  // namespace hftrain
