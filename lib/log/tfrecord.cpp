// TFRecord framing (see tfrecord.h).
#include "log/tfrecord.h"

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "log/crc32c.h"
#include "util/error.h"

namespace hftrain {
namespace {

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

}  // namespace

std::string tfrecord_frame(const std::string& data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_le(out, data.size(), 8);
  put_le(out, masked_crc32c(out.data(), 8), 4);
  out += data;
  put_le(out, masked_crc32c(data.data(), data.size()), 4);
  return out;
}

TFRecordWriter::TFRecordWriter(const std::string& path) : path_(path), file_(std::fopen(path.c_str(), "ab")) {
  if (!file_) throw RuntimeFailure("cannot open event file '" + path + "': " + std::strerror(errno));
}

TFRecordWriter::~TFRecordWriter() {
  if (file_) std::fclose(file_);
}

void TFRecordWriter::write(const std::string& data) {
  const std::string framed = tfrecord_frame(data);
  if (std::fwrite(framed.data(), 1, framed.size(), file_) != framed.size())
    throw RuntimeFailure("cannot write event file '" + path_ + "': " + std::strerror(errno));
}

void TFRecordWriter::flush() {
  if (std::fflush(file_) != 0) throw RuntimeFailure("cannot write event file '" + path_ + "': " + std::strerror(errno));
}

}  // namespace hftrain
