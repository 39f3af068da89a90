// The arrays of one Arrow IPC RecordBatch (its FieldNodes and Buffers over the message body, buffers
// optionally zstd-compressed) decoded into JSON values per column: validity bitmaps as nulls, offsets of
// strings and lists checked against their data, dictionary-encoded columns looked up in their dictionary.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "columnar/arrow_schema.h"
#include "columnar/flatbuffer.h"

namespace hftrain {

using ArrowValues = std::vector<nlohmann::ordered_json>;
using ArrowDictionaries = std::map<int64_t, ArrowValues>;

class RecordBatchReader {
 public:
  // `batch`: a RecordBatch table (slots: length 0, nodes 1, buffers 2, compression 3); `body`: the message body.
  RecordBatchReader(const FbTable& batch, Bytes body);
  int64_t length() const { return length_; }
  // The next top-level column (fields in schema order). Throws ConfigError on corrupt nodes or buffers.
  ArrowValues read_column(const ArrowField& field, const ArrowDictionaries& dictionaries);

 private:
  struct Node { int64_t length, null_count; };
  Node next_node();
  Bytes next_buffer();
  ArrowValues read_array(const ArrowField& field, const ArrowDictionaries& dictionaries, int depth);
  ArrowValues read_struct(const ArrowField& field, const Node& node, const std::vector<bool>& valid,
                          const ArrowDictionaries& dictionaries, int depth);
  ArrowValues read_list(const ArrowField& field, const Node& node, const std::vector<bool>& valid,
                        const ArrowDictionaries& dictionaries, int depth);
  ArrowValues read_leaf(const ArrowField& field, const Node& node, const std::vector<bool>& valid);

  Bytes nodes_, buffers_, body_;
  uint32_t node_count_ = 0, buffer_count_ = 0, next_node_ = 0, next_buffer_ = 0;
  int64_t length_ = 0;
  bool zstd_ = false;
  std::deque<std::vector<uint8_t>> decompressed_;
};

}  // namespace hftrain
