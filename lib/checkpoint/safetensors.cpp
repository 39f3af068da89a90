// safetensors reader/writer (see safetensors.h).
#include "checkpoint/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/fd_io.h"
#include "util/fs.h"

namespace hftrain {
namespace {

struct DtypeInfo {
  const char* name;
  torch::ScalarType type;
  std::size_t size;
};

const DtypeInfo kDtypes[] = {
    {"F64", torch::kFloat64, 8}, {"F32", torch::kFloat32, 4}, {"F16", torch::kFloat16, 2},
    {"BF16", torch::kBFloat16, 2}, {"I64", torch::kInt64, 8}, {"I32", torch::kInt32, 4},
    {"I16", torch::kInt16, 2},   {"I8", torch::kInt8, 1},     {"U8", torch::kUInt8, 1},
    {"BOOL", torch::kBool, 1},
};

const DtypeInfo* dtype_by_name(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

const DtypeInfo& dtype_by_type(torch::ScalarType t, const std::string& tensor) {
  for (const auto& d : kDtypes)
    if (d.type == t) return d;
  throw RuntimeFailure("safetensors: tensor '" + tensor + "' has an unsupported dtype");
}

constexpr uint64_t kMaxHeader = 100ull * 1024 * 1024;  // the reference implementation's limit

}  // namespace

namespace {

// The 8-byte length and JSON header of tensors with these names, dtypes and shapes, stored in this order.
std::string header_bytes(const std::vector<SafetensorsStreamWriter::Entry>& entries,
                         const std::map<std::string, std::string>& metadata, uint64_t& data_bytes) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& e : entries) {
    if (header.contains(e.name)) throw RuntimeFailure("safetensors: duplicate tensor name '" + e.name + "'");
    const auto& d = dtype_by_type(e.dtype, e.name);
    uint64_t numel = 1;
    for (int64_t n : e.shape) numel *= static_cast<uint64_t>(n);
    const uint64_t bytes = numel * d.size;
    header[e.name] = {{"dtype", d.name}, {"shape", e.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0) h += ' ';  // align the data section to 8 bytes
  std::string out;
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  data_bytes = offset;
  return out + h;
}

// The header of `tensors`, and the contiguous CPU tensors whose bytes follow it.
std::string header_bytes(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata,
                         std::vector<torch::Tensor>& contiguous, uint64_t& data_bytes) {
  std::vector<SafetensorsStreamWriter::Entry> entries;
  for (const auto& [name, t] : tensors) {
    contiguous.push_back(t.detach().to(torch::kCPU).contiguous());
    entries.push_back({name, contiguous.back().scalar_type(), contiguous.back().sizes().vec()});
  }
  return header_bytes(entries, metadata, data_bytes);
}

std::vector<SafetensorsStreamWriter::Entry> entries_of(const NamedTensors& tensors) {
  std::vector<SafetensorsStreamWriter::Entry> entries;
  for (const auto& [name, t] : tensors) entries.push_back({name, t.scalar_type(), t.sizes().vec()});
  return entries;
}

}  // namespace

SafetensorsStreamWriter::SafetensorsStreamWriter(std::string path, std::vector<Entry> entries,
                                                 const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)), entries_(std::move(entries)) {
  uint64_t data_bytes = 0;
  const std::string header = header_bytes(entries_, metadata, data_bytes);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw RuntimeFailure("cannot write '" + path_ + "': " + errno_text());
  try {
    write_bytes(header.data(), header.size());
  } catch (...) {  // the destructor will not run: leave no descriptor and no partial file behind
    ::close(fd_);
    ::unlink(path_.c_str());
    throw;
  }
}

SafetensorsStreamWriter::~SafetensorsStreamWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(path_.c_str());
}

void SafetensorsStreamWriter::write_bytes(const void* data, std::size_t size) {
  if (!write_all(fd_, data, size)) throw RuntimeFailure("cannot write '" + path_ + "': " + errno_text());
}

void SafetensorsStreamWriter::add(const std::string& name, const torch::Tensor& values) {
  if (next_ >= entries_.size() || entries_[next_].name != name)
    throw RuntimeFailure("'" + path_ + "': tensor '" + name + "' arrived out of order (expected '" +
                         (next_ < entries_.size() ? entries_[next_].name : std::string("nothing more")) + "')");
  const Entry& e = entries_[next_];
  int64_t numel = 1;
  for (int64_t n : e.shape) numel *= n;
  if (values.numel() != numel)
    throw RuntimeFailure("'" + path_ + "': tensor '" + name + "' has " + std::to_string(values.numel()) +
                         " elements, its declared shape holds " + std::to_string(numel));
  const torch::Tensor c = values.detach().to(torch::kCPU).to(e.dtype).contiguous();
  write_bytes(c.data_ptr(), c.nbytes());
  ++next_;
}

void SafetensorsStreamWriter::finish() {
  if (next_ != entries_.size())
    throw RuntimeFailure("'" + path_ + "': tensor '" + entries_[next_].name + "' was never written");
  int err = ::fsync(fd_) != 0 ? errno : 0;
  if (::close(fd_) != 0 && err == 0) err = errno;
  fd_ = -1;
  if (err != 0) {
    ::unlink(path_.c_str());
    throw RuntimeFailure("cannot write '" + path_ + "': " + errno_text(err));
  }
}

std::string serialize_safetensors(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  std::vector<torch::Tensor> contiguous;
  uint64_t data_bytes = 0;
  std::string out = header_bytes(tensors, metadata, contiguous, data_bytes);
  out.reserve(out.size() + data_bytes);
  for (const auto& c : contiguous) out.append(static_cast<const char*>(c.data_ptr()), c.nbytes());
  return out;
}

void write_safetensors_streamed(const std::string& path, const NamedTensors& tensors,
                                const std::map<std::string, std::string>& metadata) {
  SafetensorsStreamWriter writer(path, entries_of(tensors), metadata);
  for (const auto& [name, t] : tensors) writer.add(name, t);
  writer.finish();
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, serialize_safetensors(tensors, metadata));
}

SafetensorsFile parse_safetensors(const std::vector<char>& bytes, const std::string& name) {
  auto fail = [&](const std::string& why) { return RuntimeFailure("safetensors file '" + name + "': " + why); };
  if (bytes.size() < 8) throw fail("too short for a header (" + std::to_string(bytes.size()) + " bytes)");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  if (n > kMaxHeader || n > bytes.size() - 8)
    throw fail("header length " + std::to_string(n) + " exceeds the file (" + std::to_string(bytes.size()) + " bytes)");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  } catch (const nlohmann::json::exception& e) {
    throw fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) throw fail("header is not a JSON object");
  const uint64_t data_size = bytes.size() - 8 - n;
  const char* data = bytes.data() + 8 + n;

  SafetensorsFile file;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& key = it.key();
    if (key == "__metadata__") {
      if (!it->is_object()) throw fail("__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) throw fail("__metadata__ value '" + m.key() + "' is not a string");
        file.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    auto tfail = [&](const std::string& why) { return fail("tensor '" + key + "': " + why); };
    const auto& e = *it;
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      throw tfail("entry needs dtype, shape and data_offsets");
    if (!e["dtype"].is_string()) throw tfail("dtype is not a string");
    const DtypeInfo* d = dtype_by_name(e["dtype"].get<std::string>());
    if (!d) throw tfail("unsupported dtype '" + e["dtype"].get<std::string>() + "'");
    if (!e["shape"].is_array()) throw tfail("shape is not a list");
    std::vector<int64_t> shape;
    uint64_t numel = 1;
    for (const auto& s : e["shape"]) {
      if (!s.is_number_unsigned()) throw tfail("shape entries must be non-negative integers");
      uint64_t v = s.get<uint64_t>();
      if (v != 0 && numel > (uint64_t{1} << 62) / v) throw tfail("shape is too large");
      numel *= v;
      shape.push_back(static_cast<int64_t>(v));
    }
    const auto& off = e["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw tfail("data_offsets must be two non-negative integers");
    uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size)
      throw tfail("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] out of bounds (data is " +
                  std::to_string(data_size) + " bytes)");
    if (end - begin != numel * d->size)
      throw tfail("data_offsets span " + std::to_string(end - begin) + " bytes but shape and dtype need " +
                  std::to_string(numel * d->size));
    ranges.emplace_back(begin, end);
    auto t = torch::empty(shape, torch::TensorOptions().dtype(d->type));
    if (end > begin) std::memcpy(t.data_ptr(), data + begin, end - begin);
    file.tensors.emplace(key, t);
  }
  std::sort(ranges.begin(), ranges.end());
  uint64_t cursor = 0;
  for (const auto& [b, e] : ranges) {
    if (b < cursor) throw fail("tensor byte ranges overlap");
    if (b > cursor) throw fail("gap in the data section at byte " + std::to_string(cursor));
    cursor = e;
  }
  if (cursor != data_size)
    throw fail("data section is " + std::to_string(data_size) + " bytes but tensors cover " + std::to_string(cursor));
  return file;
}

SafetensorsFile load_safetensors(const std::string& path) { return parse_safetensors(read_binary_file(path), path); }

SafetensorsHeader read_safetensors_header(const std::string& path) {
  auto fail = [&](const std::string& why) { return RuntimeFailure("safetensors file '" + path + "': " + why); };
  std::ifstream in(path, std::ios::binary);
  if (!in) throw fail("cannot be read");
  unsigned char size_bytes[8];
  if (!in.read(reinterpret_cast<char*>(size_bytes), 8)) throw fail("too short for a header");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(size_bytes[i]) << (8 * i);
  if (n > kMaxHeader) throw fail("header length " + std::to_string(n) + " is implausible");
  std::string text(n, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(n))) throw fail("header length " + std::to_string(n) + " exceeds the file");
  in.seekg(0, std::ios::end);
  const uint64_t data_size = static_cast<uint64_t>(in.tellg()) - 8 - n;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) throw fail("header is not a JSON object");
  SafetensorsHeader out;
  out.data_start = 8 + n;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) throw fail("__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m)
        if (m->is_string()) out.metadata[m.key()] = m->get<std::string>();
      continue;
    }
    SafetensorsHeader::Entry e;
    e.name = it.key();
    auto tfail = [&](const std::string& why) { return fail("tensor '" + e.name + "': " + why); };
    const auto& off = (*it)["data_offsets"];
    if (!it->is_object() || !(*it)["dtype"].is_string() || !(*it)["shape"].is_array() || !off.is_array() ||
        off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw tfail("entry needs dtype, shape and data_offsets");
    e.dtype = (*it)["dtype"].get<std::string>();
    const DtypeInfo* d = dtype_by_name(e.dtype);
    if (!d) throw tfail("unsupported dtype '" + e.dtype + "'");
    uint64_t numel = 1;
    for (const auto& s : (*it)["shape"]) {
      if (!s.is_number_unsigned()) throw tfail("shape entries must be non-negative integers");
      e.shape.push_back(s.get<int64_t>());
      numel *= s.get<uint64_t>();
    }
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.begin <= e.end && e.end - e.begin == numel * d->size && e.end > data_size)
      throw fail("truncated: the header describes " + std::to_string(8 + n + e.end) + " bytes (tensor '" + e.name +
                 "') but the file has " + std::to_string(8 + n + data_size));
    if (e.begin > e.end || e.end > data_size || e.end - e.begin != numel * d->size)
      throw tfail("data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                  "] do not fit its shape and dtype inside the file's " + std::to_string(data_size) + " data bytes");
    out.tensors.push_back(std::move(e));
  }
  return out;
}

SafetensorsReader::SafetensorsReader(std::string path) : path_(std::move(path)), header_(read_safetensors_header(path_)) {
  for (std::size_t i = 0; i < header_.tensors.size(); ++i) index_[header_.tensors[i].name] = i;
}

const SafetensorsHeader::Entry* SafetensorsReader::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

torch::Tensor SafetensorsReader::read(const std::string& name) const {
  const SafetensorsHeader::Entry* e = find(name);
  if (!e) throw RuntimeFailure("safetensors file '" + path_ + "' has no tensor '" + name + "'");
  int64_t numel = 1;
  for (int64_t d : e->shape) numel *= d;
  return read_range(name, 0, numel).view(e->shape);
}

torch::Tensor SafetensorsReader::read_range(const std::string& name, int64_t begin, int64_t count) const {
  const SafetensorsHeader::Entry* e = find(name);
  if (!e) throw RuntimeFailure("safetensors file '" + path_ + "' has no tensor '" + name + "'");
  const DtypeInfo* d = dtype_by_name(e->dtype);
  const int64_t numel = static_cast<int64_t>((e->end - e->begin) / d->size);
  if (begin < 0 || count < 0 || begin + count > numel)
    throw RuntimeFailure("safetensors file '" + path_ + "': tensor '" + name + "' has " + std::to_string(numel) +
                         " elements; elements [" + std::to_string(begin) + ", " + std::to_string(begin + count) +
                         ") were asked for");
  auto t = torch::empty({count}, torch::TensorOptions().dtype(d->type));
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(header_.data_start + e->begin + static_cast<uint64_t>(begin) * d->size));
  if (count > 0 && !in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes())))
    throw RuntimeFailure("safetensors file '" + path_ + "': tensor '" + name + "' cannot be read (truncated?)");
  return t;
}

}  // namespace hftrain
