// Model weights I/O (see model_io.h).
#include "checkpoint/model_io.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "checkpoint/safetensors.h"
#include "log/logger.h"
#include "models/quantized_state.h"
#include "runspec/model_families.h"
#include "runspec/quantized_checkpoint.h"
#include "util/error.h"
#include "util/fs.h"

namespace hftrain {
namespace {

const char* kIndexFile = "model.safetensors.index.json";

std::string shard_name(std::size_t i, std::size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "model-%05zu-of-%05zu.safetensors", i, n);
  return buf;
}

// The safetensors files of a model directory -- model.safetensors, or the shards its index lists, each
// checked against the index -- with their headers (no tensor data is read). Problems are ConfigErrors
// (a user's from_pretrained directory) or RuntimeFailures (a directory hftrain wrote).
std::map<std::string, SafetensorsHeader> model_dir_files(const std::string& dir, bool strict_config_error) {
  auto fail = [&](const std::string& message) -> void {
    if (strict_config_error) throw ConfigError(message);
    throw RuntimeFailure(message);
  };
  std::map<std::string, SafetensorsHeader> files;
  const std::string single = dir + "/model.safetensors";
  const std::string index_path = dir + "/" + kIndexFile;
  if (std::filesystem::exists(single)) {
    files.emplace(single, read_safetensors_header(single));
    return files;
  }
  if (!std::filesystem::exists(index_path)) fail("'" + dir + "': no model.safetensors and no " + kIndexFile);
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(read_text_file(index_path));
  } catch (const nlohmann::json::exception& e) {
    fail("'" + index_path + "': not valid JSON: " + e.what());
  }
  if (!index.contains("weight_map") || !index["weight_map"].is_object())
    fail("'" + index_path + "': no \"weight_map\" object");
  std::map<std::string, std::vector<std::string>> listed;
  for (const auto& kv : index["weight_map"].items()) {
    if (!kv.value().is_string()) fail("'" + index_path + "': weight_map[\"" + kv.key() + "\"] is not a file name");
    listed[kv.value().get<std::string>()].push_back(kv.key());
  }
  for (const auto& [file, names] : listed) {
    const std::string path = dir + "/" + file;
    if (file.find('/') != std::string::npos || file.find("..") != std::string::npos)
      fail("'" + index_path + "': shard name '" + file + "' is not a plain file name");
    if (!std::filesystem::exists(path)) fail("'" + index_path + "': shard '" + file + "' does not exist");
    SafetensorsHeader header = read_safetensors_header(path);
    std::set<std::string> held;
    for (const auto& e : header.tensors) held.insert(e.name);
    for (const auto& name : names) {
      if (!held.count(name)) fail("'" + path + "': tensor '" + name + "' listed in " + kIndexFile + " is not in this shard");
      held.erase(name);
    }
    for (const auto& name : held) fail("'" + path + "': tensor '" + name + "' is not listed in " + kIndexFile);
    files.emplace(path, std::move(header));
  }
  return files;
}

bool matches(const std::string& name, const std::string& pattern) {
  if (!pattern.empty() && pattern[0] == '.')
    return name.size() >= pattern.size() && name.compare(name.size() - pattern.size(), pattern.size(), pattern) == 0;
  return name.compare(0, pattern.size(), pattern) == 0;
}

std::string shape_text(const torch::Tensor& t) { return c10::str(t.sizes()); }

// The quantization_config of a model directory's config.json (nullopt: none, or no config.json). The compute
// dtype is the run's, set when its layers are quantised (quantize_linear_layers), so the checkpoint's is not
// read here.
std::optional<QuantizationArgs> dir_quantization(const std::string& dir) {
  const std::string path = dir + "/config.json";
  if (!std::filesystem::exists(path)) return std::nullopt;
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError("'" + path + "': not valid JSON: " + e.what());
  }
  return checkpoint_quantization(config, path, "float32");
}

// The 4-bit or 8-bit weights of a quantised checkpoint: file tensor name -> (model weight name, suffix) for the
// weights in `four_bit` (model names, with or without the base-model prefix in the file) and their quant state.
bool quantized_part(const std::string& file_name, const std::set<std::string>& four_bit, const std::string& base_prefix,
                    std::string& weight, std::string& suffix) {
  auto model_weight = [&](const std::string& n) {
    if (four_bit.count(n)) return n;
    return !base_prefix.empty() && four_bit.count(base_prefix + n) ? base_prefix + n : std::string();
  };
  suffix.clear();
  if (!(weight = model_weight(file_name)).empty()) return true;
  for (const auto& s : quant_state_suffixes()) {
    if (file_name.size() <= s.size() + 1 || !matches(file_name, "." + s)) continue;
    suffix = s;
    if (!(weight = model_weight(file_name.substr(0, file_name.size() - s.size() - 1))).empty()) return true;
  }
  for (const auto& s : int8_module_suffixes()) {  // an 8-bit weight's state lies beside it, under its module
    if (file_name.size() <= s.size() + 1 || !matches(file_name, "." + s)) continue;
    suffix = s;
    if (!(weight = model_weight(file_name.substr(0, file_name.size() - s.size()) + "weight")).empty()) return true;
  }
  suffix.clear();
  return false;
}

}  // namespace

NamedTensors model_tensors(Model& model, const SavedWeights& weights, const std::set<std::string>& skip) {
  NamedTensors tensors;
  auto add = [&](const std::string& name, const torch::Tensor& own) {
    if (skip.count(name)) return;
    auto it = weights.replacements.find(name);
    torch::Tensor t = it == weights.replacements.end() ? own : it->second;
    if (t.is_floating_point() && t.scalar_type() != weights.dtype) t = t.to(weights.dtype);
    tensors.emplace_back(name, t);
  };
  if (const AdapterDescription* adapter = model.adapter()) {  // the adapter's tensors only, never the frozen base
    for (const auto& np : model.named_parameters())
      if (adapter->holds(np.key())) add(np.key(), np.value());
    return tensors;
  }
  const std::map<std::string, const QuantizedWeight*> four_bit = quantized_weights(model);
  for (const auto& np : model.named_parameters()) {
    auto q = four_bit.find(np.key());
    if (q == four_bit.end()) {
      add(np.key(), np.value());
    } else if (!skip.count(np.key())) {  // bitsandbytes' layout: the codes and their quant state, as they are
      for (auto& t : quant_state_tensors(np.key(), *q->second)) tensors.emplace_back(t.first, t.second.cpu());
    }
  }
  for (const auto& nb : model.named_buffers()) add(nb.key(), nb.value());
  return tensors;
}

std::string weights_file_name(const Model& model) { return model.adapter() ? kAdapterWeightsFile : "model.safetensors"; }

std::string file_tensor_name(const Model& model, const std::string& name) {
  return model.adapter() ? peft_tensor_name(*model.adapter(), name) : name;
}

bool saved_in_file(const Model& model, const std::string& name) { return !model.adapter() || model.adapter()->holds(name); }

SafetensorsFile read_weights_file(const std::string& path, const Model& model) {
  return in_model_names(model, load_safetensors(path));
}

SafetensorsFile in_model_names(const Model& model, SafetensorsFile file) {
  if (!model.adapter()) return file;
  SafetensorsFile renamed;
  renamed.metadata = file.metadata;
  for (auto& [name, t] : file.tensors) renamed.tensors.emplace(model_tensor_name(name), std::move(t));
  return renamed;
}

namespace {

// The entries of a model file: the streamed tensors first (in the producer's order), then the model's
// own (replaced) tensors, which are returned in `own`.
std::vector<SafetensorsStreamWriter::Entry> model_file_entries(Model& model, const SavedWeights& weights,
                                                               const StreamedWeights* streamed, NamedTensors& own,
                                                               const std::string& where) {
  std::map<std::string, torch::Tensor> parameters;
  for (const auto& np : model.named_parameters()) parameters.emplace(np.key(), np.value());
  std::vector<SafetensorsStreamWriter::Entry> entries;
  std::set<std::string> streamed_set;
  if (streamed)
    for (const auto& name : streamed->names) {
      auto it = parameters.find(name);
      if (it == parameters.end()) throw RuntimeFailure("saving '" + where + "': the model has no parameter '" + name + "'");
      streamed_set.insert(name);
      if (!saved_in_file(model, name)) continue;
      entries.push_back({file_tensor_name(model, name), it->second.is_floating_point() ? weights.dtype : it->second.scalar_type(),
                         it->second.sizes().vec()});
    }
  for (auto& t : model_tensors(model, weights, streamed_set)) {
    entries.push_back({file_tensor_name(model, t.first), t.second.scalar_type(), t.second.sizes().vec()});
    own.push_back(std::move(t));
  }
  return entries;
}

}  // namespace

void write_model_file(const std::string& path, Model& model, const SavedWeights& weights, const StreamedWeights* streamed) {
  NamedTensors own;
  SafetensorsStreamWriter writer(path, model_file_entries(model, weights, streamed, own, path));
  auto write = [&](const std::string& name, const torch::Tensor& values) {
    if (saved_in_file(model, name)) writer.add(file_tensor_name(model, name), values);
  };
  if (streamed) streamed->produce(write);
  for (const auto& [name, t] : own) write(name, t);
  writer.finish();
}

void save_model_dir(const std::string& dir, Model& model, uint64_t max_shard_bytes, const SavedWeights& weights,
                    const StreamedWeights* streamed) {
  std::filesystem::create_directories(dir);
  if (model.adapter()) {  // PEFT's save_pretrained: the adapter's two files
    write_model_file(dir + "/" + kAdapterWeightsFile + ".tmp", model, weights, streamed);
    rename_durably(dir + "/" + kAdapterWeightsFile + ".tmp", dir + "/" + kAdapterWeightsFile);
    nlohmann::json config = model.adapter()->config;
    config["inference_mode"] = true;  // as PEFT's save_pretrained writes it
    write_file_atomic(dir + "/" + kAdapterConfigFile, config.dump(2) + "\n");
    return;
  }
  // Tensors are packed greedily in file order, as HF's shard splitting does.
  NamedTensors own;
  const std::vector<SafetensorsStreamWriter::Entry> entries = model_file_entries(model, weights, streamed, own, dir);
  std::vector<std::size_t> file_of(entries.size(), 0);
  std::vector<std::vector<SafetensorsStreamWriter::Entry>> files(1);
  uint64_t current = 0, total = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    uint64_t bytes = torch::elementSize(entries[i].dtype);
    for (int64_t n : entries[i].shape) bytes *= static_cast<uint64_t>(n);
    if (!files.back().empty() && current + bytes > max_shard_bytes) {
      files.emplace_back();
      current = 0;
    }
    files.back().push_back(entries[i]);
    file_of[i] = files.size() - 1;
    current += bytes;
    total += bytes;
  }
  // Remove weight files of an earlier save in another layout so the directory holds exactly one.
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name == kIndexFile || name == "model.safetensors" ||
        (name.rfind("model-", 0) == 0 && name.find("-of-") != std::string::npos &&
         name.size() > 12 && name.compare(name.size() - 12, 12, ".safetensors") == 0))
      std::filesystem::remove(entry.path());
  }
  auto file_name = [&](std::size_t f) { return files.size() == 1 ? std::string("model.safetensors") : shard_name(f + 1, files.size()); };
  // Files are written one after another; each is complete before the next opens.
  std::unique_ptr<SafetensorsStreamWriter> writer;
  std::size_t open_file = 0, next_entry = 0;
  auto finish_open = [&] {
    writer->finish();
    writer.reset();
    rename_durably(dir + "/" + file_name(open_file) + ".tmp", dir + "/" + file_name(open_file));
  };
  const TensorSink write = [&](const std::string& name, const torch::Tensor& values) {
    if (next_entry >= entries.size()) throw RuntimeFailure("saving '" + dir + "': unexpected tensor '" + name + "'");
    const std::size_t f = file_of[next_entry++];
    if (writer && f != open_file) finish_open();
    if (!writer) {
      open_file = f;
      writer = std::make_unique<SafetensorsStreamWriter>(dir + "/" + file_name(f) + ".tmp", files[f]);
    }
    writer->add(name, values);
  };
  if (streamed) streamed->produce(write);
  for (const auto& [name, t] : own) write(name, t);
  if (!writer && entries.empty()) writer = std::make_unique<SafetensorsStreamWriter>(dir + "/" + file_name(0) + ".tmp", files[0]);
  if (writer) finish_open();
  if (files.size() > 1) {
    nlohmann::json index;
    index["metadata"] = {{"total_size", total}};
    index["weight_map"] = nlohmann::json::object();
    for (std::size_t f = 0; f < files.size(); ++f)
      for (const auto& e : files[f]) index["weight_map"][e.name] = file_name(f);
    write_file_atomic(dir + "/" + kIndexFile, index.dump(2) + "\n");
  }
  nlohmann::json config = model.saved_config_json();
  describe_quantization(config, model);  // quantization_config where the weights are 4-bit, none where they are not
  if (config.contains("torch_dtype") || weights.dtype != torch::kFloat)
    config["torch_dtype"] = weights.dtype == torch::kBFloat16 ? "bfloat16" : weights.dtype == torch::kHalf ? "float16" : "float32";
  write_file_atomic(dir + "/config.json", config.dump(2) + "\n");
  const nlohmann::json generation = model.saved_generation_config_json();
  if (!generation.is_null()) write_file_atomic(dir + "/generation_config.json", generation.dump(2) + "\n");
}

void load_model_weights(const std::string& path, Model& model) {
  const std::filesystem::path p(path);
  if (!std::filesystem::exists(p) && std::filesystem::exists(p.parent_path() / kIndexFile)) {
    SafetensorsFile file;
    for (const auto& [shard, header] : model_dir_files(p.parent_path().string(), /*strict_config_error=*/false)) {
      const SafetensorsReader reader(shard);
      for (const auto& e : header.tensors) file.tensors.emplace(e.name, reader.read(e.name));
    }
    load_model_weights(std::move(file), (p.parent_path() / kIndexFile).string(), model);
    return;
  }
  load_model_weights(load_safetensors(path), path, model);
}

void load_model_weights(SafetensorsFile file, const std::string& path, Model& model, bool skip_released) {
  torch::NoGradGuard no_grad;
  // An adapter model loads the adapter's tensors only, named as PEFT names them or as the model does.
  const AdapterDescription* adapter = model.adapter();
  if (adapter) file = in_model_names(model, std::move(file));
  std::vector<std::string> missing;
  auto assign = [&](const std::string& name, torch::Tensor& target) {
    if (!saved_in_file(model, name)) return;
    auto it = file.tensors.find(name);
    if (it == file.tensors.end()) {
      missing.push_back(file_tensor_name(model, name));
      return;
    }
    const auto& src = it->second;
    if (!src.sizes().equals(target.sizes()))  // the spec's model does not describe the file: a setting to fix
      throw ConfigError("'" + path + "': tensor '" + file_tensor_name(model, name) + "' has shape " +
                        c10::str(src.sizes()) + " but the model expects " + c10::str(target.sizes()) +
                        " (do model.type and its options describe these weights?)");
    // A parameter whose memory this rank does not hold (expert data parallelism: another member's expert) is
    // loaded on the ranks that hold it.
    if (target.numel() > 0 && target.storage().nbytes() == 0) {
      if (!skip_released)
        throw RuntimeFailure("'" + path + "': parameter '" + name + "' holds no memory in this process, so its weights cannot be loaded here");
    } else {
      target.copy_(src);
    }
    file.tensors.erase(it);
  };
  for (auto& np : model.named_parameters()) assign(np.key(), np.value());
  if (!adapter)
    for (auto& nb : model.named_buffers()) assign(nb.key(), nb.value());
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    throw ConfigError("'" + path + "': missing tensors: " + list + " (do model.type and its options describe these weights?)");
  }
  if (!file.tensors.empty()) {
    std::string list;
    for (const auto& kv : file.tensors) list += (list.empty() ? "" : ", ") + (adapter ? kPeftPrefix + kv.first : kv.first);
    throw RuntimeFailure("'" + path + "': unexpected tensors not in the model" +
                         std::string(adapter ? " (an adapter of another r, target_modules or model?)" : "") + ": " + list);
  }
}

namespace {

bool is_floating_dtype(const std::string& dtype) {
  return dtype == "F64" || dtype == "F32" || dtype == "F16" || dtype == "BF16";
}

// A file tensor that a LoadRules::Stacked rule splits: each of its runs becomes the source of one model
// tensor (taken from `targets`). False when no rule names it.
bool plan_stacked(const LoadRules& rules, const std::string& path, const SafetensorsHeader::Entry& e,
                  std::map<std::string, torch::Tensor>& targets, PretrainedPlan& plan) {
  for (const auto& rule : rules.stacked) {
    if (!matches(e.name, "." + rule.fused) || e.shape.size() < 2) continue;
    const std::string stem = e.name.substr(0, e.name.size() - rule.fused.size());
    int64_t numel = 1;
    for (int64_t d : e.shape) numel *= d;
    const int64_t runs = e.shape[0] * static_cast<int64_t>(rule.parts.size()), run = numel / std::max<int64_t>(runs, 1);
    for (int64_t n = 0; n < e.shape[0]; ++n)
      for (std::size_t j = 0; j < rule.parts.size(); ++j) {
        std::string name = stem + rule.model_prefix + "." + std::to_string(n) + "." + rule.parts[j];
        if (!targets.count(name) && !rules.base_prefix.empty()) name = rules.base_prefix + name;
        auto it = targets.find(name);
        if (it == targets.end())
          throw ConfigError("'" + path + "': tensor '" + e.name + "' " + c10::str(c10::IntArrayRef(e.shape)) +
                            " holds '" + name + "', which the model does not have (do model.type and its options "
                            "describe these weights?)");
        if (it->second.numel() != run || it->second.size(0) * static_cast<int64_t>(rule.parts.size()) != e.shape[1])
          throw ConfigError("'" + path + "': tensor '" + e.name + "' has shape " + c10::str(c10::IntArrayRef(e.shape)) +
                            " but the model expects " + std::to_string(e.shape[0]) + " stacked " +
                            std::to_string(rule.parts.size()) + " x " + shape_text(it->second));
        if (!is_floating_dtype(e.dtype)) throw ConfigError("'" + path + "': tensor '" + e.name + "' has a non-floating dtype");
        plan.sources[name] = {path, e.name, (n * static_cast<int64_t>(rule.parts.size()) + static_cast<int64_t>(j)) * run, run};
        targets.erase(it);
      }
    return true;
  }
  return false;
}

}  // namespace

PretrainedPlan plan_pretrained_dir(const std::string& dir, Model& model) {
  const LoadRules rules = model.family() ? model.family()->load : LoadRules{};  // its family's declaration
  std::map<std::string, torch::Tensor> targets;
  for (auto& np : model.named_parameters()) targets.emplace(np.key(), np.value());
  for (auto& nb : model.named_buffers()) targets.emplace(nb.key(), nb.value());
  const std::string where = std::filesystem::exists(dir + "/model.safetensors") ? dir + "/model.safetensors"
                                                                                  : dir + "/" + kIndexFile;
  const auto files = model_dir_files(dir, /*strict_config_error=*/true);
  std::set<std::string> file_names;  // every tensor name in the directory's files
  // File name -> model name: HF's renames (LayerNorm gamma/beta), the base-model prefix, tied aliases.
  auto model_name = [&](std::string name) {
    for (const auto& [from, to] : {std::pair<std::string, std::string>{"LayerNorm.gamma", "LayerNorm.weight"},
                                   std::pair<std::string, std::string>{"LayerNorm.beta", "LayerNorm.bias"}})
      if (matches(name, "." + from)) name = name.substr(0, name.size() - from.size()) + to;
    if (!targets.count(name) && !rules.base_prefix.empty() && targets.count(rules.base_prefix + name))
      name = rules.base_prefix + name;
    // A tied copy stands in for the tensor the file lacks (under either name, with or without the prefix).
    auto in_file = [&](const std::string& n) {
      return file_names.count(n) > 0 || (!rules.base_prefix.empty() && n.rfind(rules.base_prefix, 0) == 0 &&
                                         file_names.count(n.substr(rules.base_prefix.size())) > 0);
    };
    auto alias = rules.aliases.find(name);
    if (alias == rules.aliases.end() && !rules.base_prefix.empty()) alias = rules.aliases.find(rules.base_prefix + name);
    if (alias != rules.aliases.end() && !in_file(alias->second)) name = alias->second;
    for (const auto& [from, to] : rules.renamed_suffixes)
      if (!targets.count(name) && matches(name, from)) name = name.substr(0, name.size() - from.size()) + to;
    return name;
  };
  PretrainedPlan plan;
  std::set<std::string> four_bit;  // a quantised checkpoint's 4-bit weights: loaded apart (load_quantized_weights)
  if ((plan.quantization = dir_quantization(dir)))
    for (const auto& layer : quantizable_layers(model, *plan.quantization)) {
      four_bit.insert(layer.first + ".weight");
      targets.erase(layer.first + ".weight");
    }
  std::vector<std::pair<std::string, std::string>> unexpected;  // tensor, file
  for (const auto& [path, header] : files)
    for (const auto& e : header.tensors) file_names.insert(e.name);
  for (const auto& [path, header] : files) {
    for (const auto& e : header.tensors) {
      std::string weight, suffix;
      if (!four_bit.empty() && quantized_part(e.name, four_bit, rules.base_prefix, weight, suffix)) {
        plan.quantized[weight][suffix] = {path, e.name};
        continue;
      }
      if (plan_stacked(rules, path, e, targets, plan)) continue;
      const std::string name = model_name(e.name);
      auto it = targets.find(name);
      if (it == targets.end()) {
        bool ignored = false;
        for (const auto& pattern : rules.ignored_unexpected) ignored = ignored || matches(name, pattern) || matches(e.name, pattern);
        if (!ignored) unexpected.emplace_back(e.name, path);
        continue;
      }
      if (!it->second.sizes().equals(e.shape))
        throw ConfigError("'" + path + "': tensor '" + e.name + "' has shape " + c10::str(c10::IntArrayRef(e.shape)) +
                          " but the model (" + dir + "/config.json) expects " + shape_text(it->second));
      if (!is_floating_dtype(e.dtype) && it->second.is_floating_point())
        throw ConfigError("'" + path + "': tensor '" + e.name + "' has a non-floating dtype");
      plan.sources[name] = {path, e.name};
      targets.erase(it);
    }
  }
  if (!unexpected.empty()) {
    std::string list;
    for (const auto& [n, file] : unexpected) list += (list.empty() ? "" : ", ") + n + " (in " + file + ")";
    throw ConfigError("'" + where + "': unexpected tensors not in the model: " + list);
  }
  std::string missing, fresh;
  for (const auto& w : four_bit)
    if (!plan.quantized.count(w) || !plan.quantized.at(w).count("")) missing += (missing.empty() ? "" : ", ") + w + " (quantised)";
  for (const auto& kv : targets) {
    bool initialised = false;
    for (const auto& pattern : rules.initialised_if_missing) initialised = initialised || matches(kv.first, pattern);
    std::string& list = initialised ? fresh : missing;
    list += (list.empty() ? "" : ", ") + kv.first + " " + shape_text(kv.second);
  }
  if (!missing.empty()) throw ConfigError("'" + where + "': missing tensors: " + missing);
  if (!fresh.empty())
    log_warning("Some weights of the model were not in " + where + " and are newly initialized: " + fresh +
                " (train the model on a down-stream task before using it for predictions)");
  return plan;
}

torch::Tensor PretrainedPlan::read(const std::string& name, int64_t begin, int64_t count) const {
  return read_source(sources.at(name), begin, count);
}

QuantStateParts PretrainedPlan::read_quantized(const std::string& weight_name) const {
  QuantStateParts parts;
  for (const auto& [suffix, source] : quantized.at(weight_name)) parts.emplace(suffix, read_source(source, 0, -1));
  return parts;
}

torch::Tensor PretrainedPlan::read_source(const Source& s, int64_t begin, int64_t count) const {
  auto it = readers_.find(s.file);
  if (it == readers_.end()) it = readers_.emplace(s.file, std::make_shared<SafetensorsReader>(s.file)).first;
  if (s.numel >= 0) return it->second->read_range(s.key, s.offset + begin, count < 0 ? s.numel : count);
  return count < 0 ? it->second->read(s.key) : it->second->read_range(s.key, begin, count);
}

void load_pretrained_dir(const std::string& dir, Model& model) {
  torch::NoGradGuard no_grad;
  const PretrainedPlan plan = plan_pretrained_dir(dir, model);
  std::map<std::string, torch::Tensor> targets;
  for (auto& np : model.named_parameters()) targets.emplace(np.key(), np.value());
  for (auto& nb : model.named_buffers()) targets.emplace(nb.key(), nb.value());
  for (const auto& [name, source] : plan.sources) targets.at(name).copy_(plan.read(name).view(targets.at(name).sizes()));
  if (plan.quantization)
    load_quantized_weights(model, *plan.quantization, [&](const std::string& w) { return plan.read_quantized(w); }, dir);
}

}  // namespace hftrain
