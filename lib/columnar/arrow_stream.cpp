// Arrow IPC stream framing and messages (see arrow_stream.h; Message.fbs: version 0, header_type 1,
// header 2, bodyLength 3; DictionaryBatch: id 0, data 1, isDelta 2).
#include "columnar/arrow_stream.h"

#include <cstring>
#include <functional>

#include "columnar/arrow_arrays.h"
#include "columnar/arrow_schema.h"
#include "util/error.h"
#include "util/fs.h"

namespace hftrain {
namespace {

using Json = nlohmann::ordered_json;

// The fields that carry a dictionary, by id (a dictionary batch is decoded with its field's value type).
void collect_dictionary_fields(const std::vector<ArrowField>& fields, std::map<int64_t, ArrowField>& out) {
  for (const auto& f : fields) {
    if (f.dictionary_id) {
      ArrowField values = f;
      values.dictionary_id.reset();
      out[*f.dictionary_id] = values;
    }
    collect_dictionary_fields(f.children, out);
  }
}

struct StreamState {
  std::vector<ArrowField> fields;
  bool has_schema = false;
  std::map<int64_t, ArrowField> dictionary_fields;
  ArrowDictionaries dictionaries;
  int batches = 0, dictionary_batches = 0;
  std::vector<Json> rows;
};

void read_record_batch(StreamState& s, const FbTable& batch, Bytes body) {
  const std::string where = "record batch " + std::to_string(s.batches++);
  RecordBatchReader reader(batch, body);
  std::vector<ArrowValues> columns;
  for (const auto& f : s.fields) {
    try {
      columns.push_back(reader.read_column(f, s.dictionaries));
    } catch (const ConfigError& e) {
      throw ConfigError(where + ", column '" + f.path + "': " + e.what());
    }
  }
  for (int64_t r = 0; r < reader.length(); ++r) {
    Json obj = Json::object();
    for (std::size_t c = 0; c < s.fields.size(); ++c) obj[s.fields[c].name] = std::move(columns[c][static_cast<std::size_t>(r)]);
    s.rows.push_back(std::move(obj));
  }
}

void read_dictionary_batch(StreamState& s, const FbTable& message, Bytes body) {
  const std::string where = "dictionary batch " + std::to_string(s.dictionary_batches++);
  const int64_t id = message.i64(0);
  auto it = s.dictionary_fields.find(id);
  if (it == s.dictionary_fields.end()) throw ConfigError(where + ": dictionary id " + std::to_string(id) + " belongs to no column");
  try {
    RecordBatchReader reader(message.table(1), body);
    ArrowValues values = reader.read_column(it->second, s.dictionaries);
    ArrowValues& dict = s.dictionaries[id];
    if (!message.boolean(2)) dict.clear();  // isDelta: append, else replace
    for (auto& v : values) dict.push_back(std::move(v));
  } catch (const ConfigError& e) {
    throw ConfigError(where + ", column '" + it->second.path + "': " + e.what());
  }
}

std::vector<Json> read_stream(Bytes file) {
  ByteCursor in(file, "Arrow stream");
  if (file.size >= 8 && std::memcmp(file.data, "ARROW1", 6) == 0) in.skip(8);  // IPC file: magic, padding, the stream
  StreamState s;
  for (;;) {
    if (in.at_end()) throw ConfigError("the stream ends without its end-of-stream marker: the file is truncated");
    uint32_t length = in.le32();
    if (length == 0xFFFFFFFFu) length = in.le32();  // continuation marker, then the metadata length
    if (length == 0) break;                            // end of stream
    if (length > in.remaining())
      throw ConfigError("a message of " + std::to_string(length) + " bytes runs past the end of the file (truncated)");
    const FbTable message = FbTable::root(in.take(length));
    const int kind = message.u8(1);
    const int64_t body_length = message.i64(3);
    if (body_length < 0 || static_cast<uint64_t>(body_length) > in.remaining())
      throw ConfigError("a message body of " + std::to_string(body_length) + " bytes runs past the end of the file (truncated)");
    const Bytes body = in.take(static_cast<std::size_t>(body_length));
    if (kind == 1) {
      if (s.has_schema) throw ConfigError("a second Schema message");
      s.fields = parse_arrow_schema(message.table(2));
      collect_dictionary_fields(s.fields, s.dictionary_fields);
      s.has_schema = true;
      continue;
    }
    if (!s.has_schema) throw ConfigError("a message before the Schema");
    if (kind == 2) read_dictionary_batch(s, message.table(2), body);
    else if (kind == 3) read_record_batch(s, message.table(2), body);
    else throw ConfigError("a message of type " + std::to_string(kind) + " (tensors are not read)");
  }
  if (!s.has_schema) throw ConfigError("the stream has no Schema message");
  return std::move(s.rows);
}

}  // namespace

std::vector<nlohmann::ordered_json> read_arrow_stream_rows(const std::string& path) {
  std::vector<char> raw;
  try {
    raw = read_binary_file(path);
  } catch (const Error&) {
    throw ConfigError(path + ": cannot read the Arrow file");
  }
  try {
    return read_stream(Bytes(reinterpret_cast<const uint8_t*>(raw.data()), raw.size()));
  } catch (const ConfigError& e) {
    throw ConfigError(path + ": " + e.what());
  }
}

}  // namespace hftrain
