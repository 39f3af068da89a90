// `hftrain merge-adapter` (see merge_adapter.h).
#include "commands/merge_adapter.h"

#include <filesystem>

#include "builtins/register_builtins.h"
#include "checkpoint/model_io.h"
#include "log/logger.h"
#include "train/model_and_data.h"
#include "util/error.h"
#include "util/fs.h"

namespace hftrain {
namespace fs = std::filesystem;

int run_merge_adapter(const MergeAdapterRequest& request) {
  if (!fs::exists(fs::path(request.base_dir) / "config.json"))
    throw ConfigError("merge-adapter: '" + request.base_dir + "' is not an HF model directory (no config.json)");
  if (!fs::exists(fs::path(request.adapter_dir) / kAdapterConfigFile))
    throw ConfigError("merge-adapter: '" + request.adapter_dir + "' is not a PEFT adapter directory (no " +
                      std::string(kAdapterConfigFile) + ")");
  if (fs::exists(fs::path(request.out_dir)) && !fs::is_empty(fs::path(request.out_dir)) &&
      !fs::exists(fs::path(request.out_dir) / "config.json"))
    throw ConfigError("merge-adapter: '" + request.out_dir + "' exists and is not a model directory; choose an empty one");
  const Components& c = builtin_components();
  // The base model's type and options come from its config.json, as for model.from_pretrained (the data
  // and training sections are only what a spec requires: no data is read).
  const RunSpec spec = load_run_spec_text("model: {from_pretrained: " + yaml_quoted(request.base_dir) +
                                              "}\ndata: {type: digit_reversal}\ntraining: {output_dir: " +
                                              yaml_quoted(request.out_dir) + "}\n",
                                          request.base_dir + "/config.json", c.catalog());
  auto build = [&] {
    torch::manual_seed(0);  // heads the files lack start equal in both copies
    std::shared_ptr<Model> m = c.models.build(spec.model.type, spec.model.options, ModelContext{});
    load_pretrained(request.base_dir, *m);
    return m;
  };
  std::shared_ptr<Model> adapted = build();
  const AdapterSummary summary = attach_adapter_dir(*adapted, spec.model.type, request.adapter_dir, request.base_dir);
  std::shared_ptr<Model> plain = build();
  merge_adapter_into(*adapted, *plain);
  keep_loaded_config(*plain, request.base_dir);
  save_model_dir(request.out_dir, *plain);
  log_info("merged the adapter of " + request.adapter_dir + " (" + std::to_string(summary.adapted_layers) + " layers) into " +
           request.base_dir + ": " + request.out_dir);
  return 0;
}

}  // namespace hftrain
