// Model weights I/O (see model_io.h).
#include "checkpoint/model_io.h"

#include <filesystem>

#include "checkpoint/safetensors.h"
#include "util/error.h"
#include "util/fs.h"

namespace hftrain {

NamedTensors model_tensors(Model& model) {
  NamedTensors tensors;
  for (const auto& np : model.named_parameters()) tensors.emplace_back(np.key(), np.value());
  for (const auto& nb : model.named_buffers()) tensors.emplace_back(nb.key(), nb.value());
  return tensors;
}

void save_model_dir(const std::string& dir, Model& model) {
  std::filesystem::create_directories(dir);
  save_safetensors(dir + "/model.safetensors", model_tensors(model));
  write_file_atomic(dir + "/config.json", model.config_json().dump(2) + "\n");
}

void load_model_weights(const std::string& path, Model& model) { load_model_weights(load_safetensors(path), path, model); }

void load_model_weights(SafetensorsFile file, const std::string& path, Model& model) {
  torch::NoGradGuard no_grad;
  std::vector<std::string> missing;
  auto assign = [&](const std::string& name, torch::Tensor& target) {
    auto it = file.tensors.find(name);
    if (it == file.tensors.end()) {
      missing.push_back(name);
      return;
    }
    const auto& src = it->second;
    if (!src.sizes().equals(target.sizes()))
      throw RuntimeFailure("'" + path + "': tensor '" + name + "' has shape " + c10::str(src.sizes()) +
                           " but the model expects " + c10::str(target.sizes()));
    target.copy_(src);
    file.tensors.erase(it);
  };
  for (auto& np : model.named_parameters()) assign(np.key(), np.value());
  for (auto& nb : model.named_buffers()) assign(nb.key(), nb.value());
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    throw RuntimeFailure("'" + path + "': missing tensors: " + list);
  }
  if (!file.tensors.empty()) {
    std::string list;
    for (const auto& kv : file.tensors) list += (list.empty() ? "" : ", ") + kv.first;
    throw RuntimeFailure("'" + path + "': unexpected tensors not in the model: " + list);
  }
}

}  // namespace hftrain
