// Bounds-checked flatbuffers table reading (see flatbuffer.h).
#include "columnar/flatbuffer.h"

#include "util/error.h"

namespace hftrain {
namespace {
uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
}  // namespace

std::size_t FbTable::checked(std::size_t at, std::size_t n) const {
  if (at > buf_.size || n > buf_.size - at)
    throw ConfigError("a flatbuffer offset points outside the message (" + std::to_string(at) + " of " +
                      std::to_string(buf_.size) + " bytes)");
  return at;
}

FbTable::FbTable(Bytes buf, std::size_t pos) : buf_(buf), pos_(pos) {
  checked(pos_, 4);
  const auto soffset = static_cast<int32_t>(load_le32(buf_.data + pos_));
  const int64_t vt = static_cast<int64_t>(pos_) - soffset;
  if (vt < 0) throw ConfigError("a flatbuffer vtable before the message start");
  vtable_ = checked(static_cast<std::size_t>(vt), 4);
  vtable_size_ = le16(buf_.data + vtable_);
  if (vtable_size_ < 4 || vtable_size_ % 2 != 0) throw ConfigError("a malformed flatbuffer vtable");
  checked(vtable_, vtable_size_);
}

FbTable FbTable::root(Bytes buf) {
  if (buf.size < 8) throw ConfigError("a flatbuffer message of " + std::to_string(buf.size) + " bytes");
  return FbTable(buf, load_le32(buf.data));
}

std::size_t FbTable::field(int slot) const {
  const std::size_t entry = 4 + 2 * static_cast<std::size_t>(slot);
  if (entry + 2 > vtable_size_) return 0;
  const uint16_t off = le16(buf_.data + vtable_ + entry);
  return off == 0 ? 0 : pos_ + off;
}

std::size_t FbTable::deref(std::size_t at) const {
  checked(at, 4);
  return checked(at + load_le32(buf_.data + at), 4);
}

uint8_t FbTable::u8(int slot, uint8_t dflt) const {
  const std::size_t at = field(slot);
  return at ? buf_.data[checked(at, 1)] : dflt;
}

int16_t FbTable::i16(int slot, int16_t dflt) const {
  const std::size_t at = field(slot);
  return at ? static_cast<int16_t>(le16(buf_.data + checked(at, 2))) : dflt;
}

int32_t FbTable::i32(int slot, int32_t dflt) const {
  const std::size_t at = field(slot);
  return at ? static_cast<int32_t>(load_le32(buf_.data + checked(at, 4))) : dflt;
}

int64_t FbTable::i64(int slot, int64_t dflt) const {
  const std::size_t at = field(slot);
  return at ? static_cast<int64_t>(load_le64(buf_.data + checked(at, 8))) : dflt;
}

std::string FbTable::string(int slot) const {
  const std::size_t at = field(slot);
  if (!at) return "";
  const std::size_t s = deref(at);
  const uint32_t n = load_le32(buf_.data + s);
  checked(s + 4, n);
  return std::string(reinterpret_cast<const char*>(buf_.data + s + 4), n);
}

FbTable FbTable::table(int slot) const {
  const std::size_t at = field(slot);
  if (!at) throw ConfigError("a required flatbuffer table is missing");
  return FbTable(buf_, deref(at));
}

uint32_t FbTable::vector_size(int slot) const {
  const std::size_t at = field(slot);
  return at ? load_le32(buf_.data + deref(at)) : 0;
}

std::size_t FbTable::vector_data(int slot) const {
  const std::size_t at = field(slot);
  return at ? deref(at) + 4 : 0;
}

FbTable FbTable::table_at(int slot, uint32_t i) const {
  if (i >= vector_size(slot)) throw ConfigError("a flatbuffer vector index past its end");
  const std::size_t elem = checked(vector_data(slot) + 4 * static_cast<std::size_t>(i), 4);
  return FbTable(buf_, deref(elem));
}

}  // namespace hftrain
