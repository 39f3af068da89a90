// TFRecord framing, the container of TensorBoard event files. Each record is
//   uint64 length (little endian) | uint32 masked_crc32c(length bytes) | data | uint32 masked_crc32c(data)
#pragma once

#include <cstdio>
#include <string>

namespace hftrain {

// The framed bytes of one record.
std::string tfrecord_frame(const std::string& data);

// Appends records to a file, flushing on request. Throws RuntimeFailure naming the path on I/O errors.
class TFRecordWriter {
 public:
  explicit TFRecordWriter(const std::string& path);
  ~TFRecordWriter();
  TFRecordWriter(const TFRecordWriter&) = delete;
  TFRecordWriter& operator=(const TFRecordWriter&) = delete;

  void write(const std::string& data);
  void flush();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace hftrain
