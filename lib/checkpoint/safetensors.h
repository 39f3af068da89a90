// The safetensors file format, read and written by hftrain itself. Reading is strict: header length
// and JSON, dtypes, shapes, offsets (in bounds, non-overlapping, covering the data exactly) are all
// checked, and a malformed file raises RuntimeFailure naming the file and the tensor.
// Format: 8-byte little-endian header size N, N bytes of JSON {name: {dtype, shape, data_offsets}},
// optional "__metadata__" (string -> string), then the raw little-endian tensor bytes.
#pragma once

#include <cstdint>
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

// Writes the file tensor by tensor, never holding its bytes in memory (fsynced; the caller renames or
// records it).
void write_safetensors_streamed(const std::string& path, const NamedTensors& tensors,
                                const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

// A safetensors file written as its tensors become available: the header (every name, dtype and shape,
// declared up front) is written first, then each tensor's bytes as add() receives them, in the declared
// order, so a writer can produce one tensor at a time (e.g. gathered from ZeRO-3 shards). A tensor of
// another size or out of order throws RuntimeFailure naming it; finish() checks that all arrived and
// fsyncs. An unfinished file is removed when the writer is destroyed.
class SafetensorsStreamWriter {
 public:
  struct Entry {
    std::string name;
    torch::ScalarType dtype;
    std::vector<int64_t> shape;
  };
  SafetensorsStreamWriter(std::string path, std::vector<Entry> entries,
                          const std::map<std::string, std::string>& metadata = {{"format", "pt"}});
  ~SafetensorsStreamWriter();
  SafetensorsStreamWriter(const SafetensorsStreamWriter&) = delete;
  SafetensorsStreamWriter& operator=(const SafetensorsStreamWriter&) = delete;

  // The next declared tensor's values (converted to its declared dtype).
  void add(const std::string& name, const torch::Tensor& values);
  void finish();
  std::size_t written() const { return next_; }

 private:
  void write_bytes(const void* data, std::size_t size);

  std::string path_;
  std::vector<Entry> entries_;
  std::size_t next_ = 0;
  int fd_ = -1;
};

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
    uint64_t begin = 0, end = 0;  // byte range in the data section
  };
  std::vector<Entry> tensors;
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // file offset of the data section
};
// Checks dtypes and that every tensor's byte range lies inside the file and fits its shape.
SafetensorsHeader read_safetensors_header(const std::string& path);

// Reads single tensors, or runs of a tensor's elements, from a file without loading the rest of it
// (so a re-partitioning reads only the bytes it needs).
class SafetensorsReader {
 public:
  explicit SafetensorsReader(std::string path);
  const std::string& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  // The entry of `name`, or nullptr.
  const SafetensorsHeader::Entry* find(const std::string& name) const;
  // The whole tensor, or `count` elements from flat element `begin` (as a 1-D tensor). A missing
  // tensor or a range outside it throws RuntimeFailure naming the file and the tensor.
  torch::Tensor read(const std::string& name) const;
  torch::Tensor read_range(const std::string& name, int64_t begin, int64_t count) const;

 private:
  std::string path_;
  SafetensorsHeader header_;
  std::map<std::string, std::size_t> index_;
};
// Parses from memory; `name` is used in error messages.
SafetensorsFile parse_safetensors(const std::vector<char>& bytes, const std::string& name);

}  // namespace hftrain
