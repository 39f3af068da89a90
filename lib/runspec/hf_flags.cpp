// HfArgumentParser-style flags and torch.distributed.launch's --local_rank (see hf_flags.h).
#include "runspec/hf_flags.h"

#include <algorithm>
#include <cctype>

#include <yaml-cpp/yaml.h>

#include "config/issues.h"
#include "runspec/hf_names.h"
#include "runspec/hf_unbuilt.h"
#include "runspec/sections.h"
#include "util/error.h"

namespace hftrain {
namespace {

// run_clm / run_mlm / run_summarization flags (ModelArguments, DataTrainingArguments) and the run-spec
// key that holds the same setting.
struct ScriptFlag {
  std::string name;
  std::string key;
  bool boolean = false;
};
const std::vector<ScriptFlag> kScriptFlags = {
    {"model_name_or_path", "model.from_pretrained"},
    {"tokenizer_name", "data.tokenizer"},
    {"train_file", "data.train_file"},
    {"validation_file", "data.validation_file"},
    {"test_file", "data.test_file"},
    {"block_size", "data.block_size"},
    {"max_seq_length", "data.max_length"},
    {"validation_split_percentage", "data.validation_split_percentage"},
    {"overwrite_cache", "data.overwrite_cache", true},
    {"mlm_probability", "data.mlm_probability"},
    {"max_source_length", "data.max_source_length"},
    {"max_target_length", "data.max_target_length"},
    {"source_prefix", "data.source_prefix"},
    {"pad_to_max_length", "data.pad_to_max_length", true},
    {"max_train_samples", "data.max_train_samples"},
    {"max_eval_samples", "data.max_eval_samples"},
    {"max_predict_samples", "data.max_predict_samples"},
    {"torch_dtype", "model.torch_dtype"},  // run_clm's ModelArguments (hf_model_args.h)
    {"dtype", "model.torch_dtype"},        // its newer name (current run_clm)
    {"attn_implementation", "model.attn_implementation"},
};

// Script flags that fetch from the Hub: hftrain downloads nothing.
const std::vector<std::string> kDownloadFlags = {"dataset_name",  "dataset_config_name", "cache_dir", "model_revision",
                                                 "token",         "use_auth_token",      "trust_remote_code",
                                                 "config_name"};

// The HF names of hf_names.h that HF parses as booleans.
const std::vector<std::string> kBooleanHfNames = {"bf16", "fp16", "no_cuda"};

// HF's string_to_bool.
std::optional<bool> hf_bool(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  if (text == "yes" || text == "true" || text == "t" || text == "y" || text == "1") return true;
  if (text == "no" || text == "false" || text == "f" || text == "n" || text == "0") return false;
  return std::nullopt;
}

// A value as the override's YAML: as written when YAML reads it back as that same plain text (numbers,
// words, paths), else as a double-quoted string (HF takes string values verbatim).
std::string yaml_value(const std::string& value) {
  try {
    YAML::Node n = YAML::Load(value);
    if (n.IsScalar() && n.Scalar() == value && n.Tag() != "!") return value;
    if ((n.IsMap() || n.IsSequence()) && !value.empty() && (value.front() == '{' || value.front() == '['))
      return value;  // JSON text (lr_scheduler_kwargs, fsdp_config, a list)
  } catch (const YAML::Exception&) {
  }
  std::string quoted = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

int parse_local_rank(const std::string& spelling, const std::string& text) {
  std::size_t used = 0;
  long long v = -2;
  try {
    v = std::stoll(text, &used, 10);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || v < -1 || v > (1 << 20))
    throw ConfigError(spelling + ": '" + text + "' is not a local rank (an integer >= -1, as torch.distributed.launch passes it)");
  return static_cast<int>(v);
}

}  // namespace

std::optional<HfFlag> find_hf_flag(const std::string& name) {
  for (const auto& info : schema_of<TrainingArgs>().describe())
    if (info.name == name) return HfFlag{"training." + name, info.type.rfind("bool", 0) == 0};
  for (const auto& info : hf_training_names())
    if (info.name == name)
      return HfFlag{"training." + name, std::find(kBooleanHfNames.begin(), kBooleanHfNames.end(), name) != kBooleanHfNames.end()};
  for (const auto& info : hf_unbuilt_fields())
    if (info.name == name) return HfFlag{"training." + name, info.type.rfind("bool", 0) == 0};
  if (name == "deepspeed") return HfFlag{"training.deepspeed", false};
  for (const auto& f : kScriptFlags)
    if (f.name == name) return HfFlag{f.key, f.boolean};
  return std::nullopt;
}

std::vector<std::string> hf_flag_names() {
  std::vector<std::string> names = schema_of<TrainingArgs>().names();
  for (const auto& info : hf_training_names()) names.push_back(info.name);
  for (const auto& info : hf_unbuilt_fields()) names.push_back(info.name);
  names.push_back("deepspeed");
  for (const auto& f : kScriptFlags) names.push_back(f.name);
  return names;
}

std::vector<std::string> rewrite_hf_flags(const std::vector<std::string>& args,
                                          const std::function<bool(const std::string&)>& is_own_option) {
  std::vector<std::string> kept, overrides;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--") {  // everything after it is positional
      kept.insert(kept.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (word.rfind("--", 0) != 0 || word.size() <= 2) {
      kept.push_back(word);
      continue;
    }
    const std::size_t eq = word.find('=');
    const std::string flag = word.substr(0, eq);
    std::string name = flag.substr(2);
    if (is_own_option(flag)) {
      kept.push_back(word);
      continue;
    }
    std::optional<HfFlag> hf = find_hf_flag(name);
    bool negated = false;
    if (!hf && name.rfind("no_", 0) == 0) {  // HF's --no_<flag> of a boolean
      hf = find_hf_flag(name.substr(3));
      if (hf && !hf->boolean) hf.reset();
      negated = hf.has_value();
      if (negated) name = name.substr(3);
    }
    if (!hf) {
      if (std::find(kDownloadFlags.begin(), kDownloadFlags.end(), name) != kDownloadFlags.end())
        throw ConfigError(flag + ": nothing is downloaded: hftrain reads local files and model directories (give "
                                 "--train_file / --validation_file, and --model_name_or_path a local directory)");
      if (name.find('_') == std::string::npos) {  // the command's own parser reports it, with its options
        kept.push_back(word);
        continue;
      }
      throw ConfigError("unknown option " + flag + did_you_mean(name, hf_flag_names()) +
                        " (HF-style flags are TrainingArguments fields and run_clm's model/data flags; any spec "
                        "value can be given as --set section.key=value)");
    }
    std::string value;
    if (eq != std::string::npos) {
      value = word.substr(eq + 1);
    } else if (hf->boolean) {
      value = "true";
      if (i + 1 < args.size() && hf_bool(args[i + 1])) value = args[++i];
    } else if (i + 1 < args.size() && (args[i + 1].rfind("--", 0) != 0 || args[i + 1].size() == 2) && args[i + 1] != "--") {
      value = args[++i];
    } else {
      throw ConfigError(flag + ": expected a value (" + flag + " VALUE or " + flag + "=VALUE)");
    }
    if (hf->boolean) {
      const std::optional<bool> b = hf_bool(value);
      if (!b) throw ConfigError(flag + ": '" + value + "' is not a boolean (true/false, yes/no, t/f, y/n, 1/0, as HF parses it)");
      value = (*b != negated) ? "true" : "false";
    } else if (negated) {
      throw ConfigError(flag + ": --no_" + name + " takes no value");
    }
    overrides.push_back(hf->key + "=" + yaml_value(value));
  }
  for (const auto& o : overrides) {
    kept.push_back("--set");
    kept.push_back(o);
  }
  return kept;
}

std::optional<int> take_local_rank_flag(std::vector<std::string>& args) {
  std::optional<int> rank;
  std::vector<std::string> kept;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    std::string spelling, value;
    for (const char* s : {"--local_rank", "--local-rank"}) {
      if (word == s) {
        if (i + 1 >= args.size()) throw ConfigError(std::string(s) + ": expected the local rank");
        spelling = s;
        value = args[++i];
      } else if (word.rfind(std::string(s) + "=", 0) == 0) {
        spelling = s;
        value = word.substr(std::string(s).size() + 1);
      }
    }
    if (spelling.empty()) {
      kept.push_back(word);
      continue;
    }
    const int r = parse_local_rank(spelling, value);
    if (rank && *rank != r)
      throw ConfigError(spelling + "=" + value + " disagrees with the local rank given before (" + std::to_string(*rank) + ")");
    rank = r;
  }
  args = kept;
  return rank;
}

std::optional<int> check_local_rank_flag(int flag, const std::function<std::optional<std::string>(const std::string&)>& env) {
  const auto nonempty = [&](const char* name) {
    std::optional<std::string> v = env(name);
    return v && !v->empty() ? v : std::nullopt;
  };
  const std::string given = "--local_rank=" + std::to_string(flag);
  if (const auto local = nonempty("LOCAL_RANK")) {
    if (*local != std::to_string(flag))
      throw ConfigError(given + " (from the launcher's command line) disagrees with LOCAL_RANK=" + *local +
                        " in the environment; the launcher passes both for one worker, so they must be equal");
    return std::nullopt;
  }
  if (nonempty("RANK") || nonempty("WORLD_SIZE")) {
    if (flag < 0)
      throw ConfigError(given + ": a worker of a launched job (RANK / WORLD_SIZE are set) needs its local rank (>= 0)");
    return flag;  // the legacy launcher's only word on the local rank
  }
  if (flag > 0)
    throw ConfigError(given + " but no launcher environment (RANK, WORLD_SIZE, LOCAL_RANK) is set: start the workers "
                              "with torchrun or torch.distributed.launch, or `hftrain train --nproc-per-node N`");
  return std::nullopt;
}

}  // namespace hftrain
