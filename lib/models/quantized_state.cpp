// bitsandbytes' serialised 4-bit weight, read with every tensor checked and written back (see quantized_state.h).
#include "models/quantized_state.h"

#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace hftrain {
namespace {

const std::string kStatePrefix = "quant_state.bitsandbytes__";

std::string type_name(kernels::Quant4Type type) { return type == kernels::Quant4Type::kNf4 ? "nf4" : "fp4"; }

// A dtype as safetensors names it (the file's own words).
std::string file_dtype(torch::ScalarType t) {
  switch (t) {
    case torch::kByte: return "U8";
    case torch::kChar: return "I8";
    case torch::kFloat: return "F32";
    case torch::kBFloat16: return "BF16";
    case torch::kHalf: return "F16";
    case torch::kDouble: return "F64";
    default: return c10::toString(t);
  }
}

// How the weight's dtype before quantisation is written in the quant state (str(torch.dtype) without "torch.").
const std::map<std::string, torch::ScalarType>& source_dtypes() {
  static const std::map<std::string, torch::ScalarType> names = {
      {"float32", torch::kFloat}, {"bfloat16", torch::kBFloat16}, {"float16", torch::kHalf}};
  return names;
}

// Checks of one layer's file tensors; every problem names the file and the tensor.
struct StateReader {
  const std::string& weight;
  const std::map<std::string, torch::Tensor>& parts;
  const std::string& where;

  std::string name(const std::string& suffix) const { return suffix.empty() ? weight : weight + "." + suffix; }
  [[noreturn]] void fail(const std::string& suffix, const std::string& what) const {
    throw ConfigError("'" + where + "': tensor '" + name(suffix) + "' " + what);
  }
  bool has(const std::string& suffix) const { return parts.count(suffix) > 0; }
  // The tensor, of exactly this dtype and shape.
  torch::Tensor get(const std::string& suffix, torch::ScalarType dtype, const std::vector<int64_t>& shape,
                    const std::string& what) const {
    auto it = parts.find(suffix);
    if (it == parts.end()) fail(suffix, "is missing (" + what + ", bitsandbytes' 4-bit layout)");
    const torch::Tensor& t = it->second;
    if (t.scalar_type() != dtype || !t.sizes().equals(shape))
      fail(suffix, "has dtype " + file_dtype(t.scalar_type()) + " shape " + c10::str(t.sizes()) + ", expected " +
                       file_dtype(dtype) + " " + c10::str(c10::IntArrayRef(shape)) + " (" + what + ")");
    return t.contiguous();
  }
  torch::Tensor finite(const std::string& suffix, torch::Tensor t) const {
    if (!torch::isfinite(t).all().item<bool>()) fail(suffix, "holds values that are not finite");
    return t;
  }
};

// The quant state's JSON: the one quant_state.bitsandbytes__<type> tensor, its type among the suffixes.
nlohmann::json state_json(const StateReader& r, kernels::Quant4Type expected, std::string& suffix) {
  for (const char* type : {"nf4", "fp4"}) {
    if (!r.has(kStatePrefix + type)) continue;
    if (!suffix.empty()) r.fail(kStatePrefix + type, "is a second quant state beside '" + r.name(suffix) + "'");
    suffix = kStatePrefix + type;
  }
  if (suffix.empty())
    r.fail(kStatePrefix + type_name(expected), "is missing (the quant state's JSON, bitsandbytes' 4-bit layout)");
  const torch::Tensor bytes = r.parts.at(suffix).contiguous();
  if (bytes.scalar_type() != torch::kByte || bytes.dim() != 1)
    r.fail(suffix, "has dtype " + file_dtype(bytes.scalar_type()) + " shape " + c10::str(bytes.sizes()) +
                       ", expected U8 [bytes] (the UTF-8 JSON of the quant state)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()), bytes.numel()));
  } catch (const nlohmann::json::exception& e) {
    r.fail(suffix, std::string("is not the UTF-8 JSON of a quant state: ") + e.what());
  }
  if (!j.is_object()) r.fail(suffix, "is not a JSON object");
  static const std::set<std::string> known = {"quant_type", "blocksize", "dtype", "shape",
                                              "nested_blocksize", "nested_dtype", "nested_offset"};
  for (const auto& kv : j.items())
    if (!known.count(kv.key())) r.fail(suffix, "holds the key '" + kv.key() + "', which is not part of bitsandbytes' quant state");
  return j;
}

int64_t positive_int(const StateReader& r, const std::string& suffix, const nlohmann::json& j, const std::string& key) {
  if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() <= 0)
    r.fail(suffix, "has " + key + " " + (j.contains(key) ? j[key].dump() : std::string("missing")) + ", expected a positive integer");
  return j[key].get<int64_t>();
}

// The quant state's scalars: the settings of the weight (the compute dtype is quantization_config's).
QuantSettings read_settings(const StateReader& r, const std::string& suffix, const nlohmann::json& j,
                             const QuantSettings& expected, int64_t out, int64_t in, torch::ScalarType& source_dtype,
                             float& offset) {
  QuantSettings s = expected;
  const std::string named = suffix.substr(kStatePrefix.size());
  if (j.value("quant_type", nlohmann::json()) != named)
    r.fail(suffix, "has quant_type " + j.value("quant_type", nlohmann::json()).dump() + ", but its name says " + named);
  if (named != type_name(expected.type))
    r.fail(suffix, "is an " + named + " quant state, but config.json's quantization_config has bnb_4bit_quant_type " +
                       type_name(expected.type));
  s.blocksize = positive_int(r, suffix, j, "blocksize");
  if (s.blocksize % 2) r.fail(suffix, "has blocksize " + std::to_string(s.blocksize) + ": 4-bit blocks of an odd size are not built");
  const nlohmann::json shape = j.value("shape", nlohmann::json());
  if (shape != nlohmann::json::array({out, in}))
    r.fail(suffix, "has shape " + shape.dump() + ", but the layer is [" + std::to_string(out) + ", " + std::to_string(in) + "]");
  const nlohmann::json dtype = j.value("dtype", nlohmann::json());
  if (!dtype.is_string() || !source_dtypes().count(dtype.get<std::string>()))
    r.fail(suffix, "has dtype " + dtype.dump() + ", expected float32, bfloat16 or float16");
  source_dtype = source_dtypes().at(dtype.get<std::string>());
  const bool nested = j.contains("nested_offset") || j.contains("nested_blocksize") || j.contains("nested_dtype");
  if (nested != expected.double_quant)
    r.fail(suffix, std::string(nested ? "is" : "is not") + " double-quantised (nested_*), but config.json's "
                   "quantization_config has bnb_4bit_use_double_quant " + (expected.double_quant ? "true" : "false"));
  if (!nested) return s;
  s.nested_blocksize = positive_int(r, suffix, j, "nested_blocksize");
  if (j.value("nested_dtype", nlohmann::json()) != "float32")
    r.fail(suffix, "has nested_dtype " + j.value("nested_dtype", nlohmann::json()).dump() + ", expected float32");
  const nlohmann::json o = j.value("nested_offset", nlohmann::json());
  if (!o.is_number() || !std::isfinite(o.get<double>())) r.fail(suffix, "has nested_offset " + o.dump() + ", expected a finite number");
  offset = static_cast<float>(o.get<double>());
  return s;
}

// An 8-bit weight's codes and row scales; the format tensor, when present, must say row-major.
QuantizedWeight int8_weight_from_state(const StateReader& r, const QuantSettings& expected, int64_t out, int64_t in) {
  for (const auto& kv : r.parts)
    if (!kv.first.empty() && kv.first != "SCB" && kv.first != "weight_format")
      r.fail(kv.first, "is not part of bitsandbytes' 8-bit state (the weight, its module's SCB and weight_format)");
  QuantizedWeight q;
  q.settings = expected;
  q.out = out;
  q.in = in;
  q.packed = r.get("", torch::kChar, {out, in}, "the int8 codes of a layer that config.json's quantization_config quantises");
  const std::string module = r.weight.substr(0, r.weight.rfind('.'));  // W = M.weight
  auto module_name = [&](const std::string& suffix) { return module + "." + suffix; };
  auto it = r.parts.find("SCB");
  if (it == r.parts.end()) throw ConfigError("'" + r.where + "': tensor '" + module_name("SCB") + "' is missing (each row's absmax, bitsandbytes' 8-bit layout)");
  if (it->second.scalar_type() != torch::kFloat || !it->second.sizes().equals({out}))
    throw ConfigError("'" + r.where + "': tensor '" + module_name("SCB") + "' has dtype " + file_dtype(it->second.scalar_type()) +
                      " shape " + c10::str(it->second.sizes()) + ", expected F32 [" + std::to_string(out) + "] (each row's absmax)");
  q.absmax = it->second.contiguous();
  if (!torch::isfinite(q.absmax).all().item<bool>() || (q.absmax < 0).any().item<bool>())
    throw ConfigError("'" + r.where + "': tensor '" + module_name("SCB") + "' holds values that are negative or not finite");
  it = r.parts.find("weight_format");
  if (it != r.parts.end()) {
    const torch::Tensor f = it->second;
    if (f.numel() != 1 || f.is_floating_point())
      throw ConfigError("'" + r.where + "': tensor '" + module_name("weight_format") + "' has dtype " + file_dtype(f.scalar_type()) +
                        " shape " + c10::str(f.sizes()) + ", expected one integer (0: row-major)");
    const int64_t format = f.to(torch::kLong).item<int64_t>();
    if (format != 0)
      throw ConfigError("'" + r.where + "': tensor '" + module_name("weight_format") + "' is " + std::to_string(format) +
                        ": a tiled GPU layout (1 col32, 2 col_turing, 3 col_ampere) of bitsandbytes before 0.44, which "
                        "hftrain does not read; save the model again with a newer bitsandbytes (row-major, format 0)");
  }
  return q;
}

}  // namespace

const std::vector<std::string>& int8_module_suffixes() {
  static const std::vector<std::string> suffixes = {"SCB", "weight_format"};
  return suffixes;
}

const std::vector<std::string>& quant_state_suffixes() {
  static const std::vector<std::string> suffixes = {"absmax", "quant_map", "nested_absmax", "nested_quant_map",
                                                    kStatePrefix + "nf4", kStatePrefix + "fp4"};
  return suffixes;
}

QuantizedWeight quantized_weight_from_state(const std::string& weight_name, const std::map<std::string, torch::Tensor>& parts,
                                            const QuantSettings& expected, int64_t out, int64_t in, const std::string& where) {
  const StateReader r{weight_name, parts, where};
  if (expected.bits == 8) return int8_weight_from_state(r, expected, out, in);
  for (const auto& kv : parts) {
    bool known = kv.first.empty();
    for (const auto& s : quant_state_suffixes()) known = known || kv.first == s;
    if (!known) r.fail(kv.first, "is not part of bitsandbytes' 4-bit quant state");
  }
  QuantizedWeight q;
  q.out = out;
  q.in = in;
  std::string suffix;
  const nlohmann::json j = state_json(r, expected.type, suffix);
  q.settings = read_settings(r, suffix, j, expected, out, in, q.source_dtype, q.offset);
  const int64_t n = q.numel(), blocks = kernels::quant_blocks(n, q.settings.blocksize);
  q.packed = r.get("", torch::kByte, {(n + 1) / 2, 1}, "the packed 4-bit codes of a layer that config.json's quantization_config quantises");
  q.absmax = r.get("absmax", q.settings.double_quant ? torch::kByte : torch::kFloat, {blocks}, "one scale a block");
  if (!q.settings.double_quant) r.finite("absmax", q.absmax);
  q.quant_map = r.finite("quant_map", r.get("quant_map", torch::kFloat, {16}, "the 16 code values"));
  const torch::Tensor table = torch::from_blob(const_cast<float*>(kernels::quant4_code_values(q.settings.type)), {16}, torch::kFloat);
  if (!q.quant_map.eq(table).all().item<bool>())
    r.fail("quant_map", "is not bitsandbytes' " + type_name(q.settings.type) + " code table");
  if (q.settings.double_quant) {
    q.nested_absmax = r.finite("nested_absmax", r.get("nested_absmax", torch::kFloat,
                                                      {kernels::quant_blocks(blocks, q.settings.nested_blocksize)}, "one scale a nested block"));
    q.nested_quant_map = r.finite("nested_quant_map", r.get("nested_quant_map", torch::kFloat, {256}, "the 8-bit map of the scales"));
  } else {
    for (const char* s : {"nested_absmax", "nested_quant_map"})
      if (r.has(s)) r.fail(s, "is present, but the quant state is not double-quantised");
  }
  return q;
}

std::vector<std::pair<std::string, torch::Tensor>> quant_state_tensors(const std::string& weight_name, const QuantizedWeight& w) {
  if (w.eight_bit()) {  // Linear8bitLt's state dict: the weight, then its module's SCB and weight_format
    const std::string module = weight_name.substr(0, weight_name.rfind('.'));
    return {{weight_name, w.packed}, {module + ".SCB", w.absmax}, {module + ".weight_format", torch::zeros({}, torch::kByte)}};
  }
  std::vector<std::pair<std::string, torch::Tensor>> out = {{weight_name, w.packed}, {weight_name + ".absmax", w.absmax},
                                                            {weight_name + ".quant_map", w.quant_map}};
  // json.dumps of as_dict's non-tensor items: their order, ", " and ": " between them
  std::string dtype = "float32";
  for (const auto& [name, t] : source_dtypes())
    if (t == w.source_dtype) dtype = name;
  std::string text = "{\"quant_type\": \"" + type_name(w.settings.type) + "\", \"blocksize\": " +
                     std::to_string(w.settings.blocksize) + ", \"dtype\": \"" + dtype + "\", \"shape\": [" +
                     std::to_string(w.out) + ", " + std::to_string(w.in) + "]";
  if (w.nested()) {
    out.emplace_back(weight_name + ".nested_absmax", w.nested_absmax);
    out.emplace_back(weight_name + ".nested_quant_map", w.nested_quant_map);
    text += ", \"nested_blocksize\": " + std::to_string(w.settings.nested_blocksize) +
            ", \"nested_dtype\": \"float32\", \"nested_offset\": " + nlohmann::json(static_cast<double>(w.offset)).dump();
  }
  text += "}";
  torch::Tensor bytes = torch::empty({static_cast<int64_t>(text.size())}, torch::kByte);
  std::copy(text.begin(), text.end(), reinterpret_cast<char*>(bytes.data_ptr<uint8_t>()));
  out.emplace_back(weight_name + "." + kStatePrefix + type_name(w.settings.type), bytes);
  return out;
}

}  // namespace hftrain
