// The safetensors file format, read and written by hftrain itself. Reading is strict: header length
// and JSON, dtypes, shapes, offsets (in bounds, non-overlapping, covering the data exactly) are all
// checked, and a malformed file raises RuntimeFailure naming the file and the tensor.
// Format: 8-byte little-endian header size N, N bytes of JSON {name: {dtype, shape, data_offsets}},
// optional "__metadata__" (string -> string), then the raw little-endian tensor bytes.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "util/torch_compat.h"

namespace hftrain {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {{"format", "pt"}});
// The exact bytes save_safetensors writes (for writers that manage durability themselves).
std::string serialize_safetensors(const NamedTensors& tensors,
                                  const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

struct SafetensorsFile {
  std::map<std::string, torch::Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

SafetensorsFile load_safetensors(const std::string& path);

// A file's header alone (names, dtypes, shapes, metadata), read without its tensor data.
struct SafetensorsHeader {
  struct Entry {
    std::string name, dtype;
    std::vector<int64_t> shape;
  };
  std::vector<Entry> tensors;
  std::map<std::string, std::string> metadata;
};
SafetensorsHeader read_safetensors_header(const std::string& path);
// Parses from memory; `name` is used in error messages.
SafetensorsFile parse_safetensors(const std::vector<char>& bytes, const std::string& name);

}  // namespace hftrain
