// Rows of an Arrow IPC stream file (datasets' .arrow files: continuation marker, length, a flatbuffer
// Message, its 8-byte-aligned body; Schema first, then dictionary and record batches, then the
// end-of-stream marker) as JSON objects, column order kept. An Arrow IPC *file* (ARROW1 magic) is read
// through the stream it embeds. Every error is a ConfigError naming the file and, where it arose in one,
// the record batch and column.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hftrain {

std::vector<nlohmann::ordered_json> read_arrow_stream_rows(const std::string& path);

}  // namespace hftrain
