// TensorBoard event files (see tensorboard_writer.h). Protobuf wire format: a key is the varint
// (field << 3 | wire type); type 0 varint, 1 fixed 64-bit, 2 length-delimited, 5 fixed 32-bit.
#include "log/tensorboard_writer.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "log/tfrecord.h"
#include "util/error.h"

namespace hftrain {
namespace {

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void put_key(std::string& out, int field, int wire_type) { put_varint(out, static_cast<uint64_t>(field << 3 | wire_type)); }

void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

template <class T>
void put_fixed(std::string& out, int field, T value) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "fixed32 or fixed64");
  put_key(out, field, sizeof(T) == 8 ? 1 : 5);
  unsigned char raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));  // little-endian host (x86-64, aarch64)
  out.append(reinterpret_cast<const char*>(raw), sizeof(T));
}

std::string event_header(double wall_time, int64_t step) {
  std::string e;
  put_fixed(e, 1, wall_time);
  if (step != 0) {
    put_key(e, 2, 0);
    put_varint(e, static_cast<uint64_t>(step));
  }
  return e;
}

std::string summary_event(const std::string& value, int64_t step, double wall_time) {
  std::string summary;
  put_bytes(summary, 1, value);
  std::string e = event_header(wall_time, step);
  put_bytes(e, 5, summary);
  return e;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == 0) return "localhost";
  return buf;
}

}  // namespace

std::string tensorboard_tag(const std::string& key) {
  if (key.rfind("eval_", 0) == 0) return "eval/" + key.substr(5);
  if (key.rfind("test_", 0) == 0) return "test/" + key.substr(5);
  return "train/" + key;
}

std::string default_logging_dir(const std::string& output_dir) {
  std::time_t t = std::time(nullptr);
  std::tm local{};
  localtime_r(&t, &local);
  char stamp[64];
  std::strftime(stamp, sizeof(stamp), "%b%d_%H-%M-%S", &local);
  return (std::filesystem::path(output_dir) / "runs" / (std::string(stamp) + "_" + host_name())).string();
}

std::string encode_file_version_event(double wall_time) {
  std::string e = event_header(wall_time, 0);
  put_bytes(e, 3, "brain.Event:2");
  return e;
}

std::string encode_scalar_event(const std::string& tag, float value, int64_t step, double wall_time) {
  std::string v;
  put_bytes(v, 1, tag);
  put_fixed(v, 2, value);
  return summary_event(v, step, wall_time);
}

std::string encode_text_event(const std::string& tag, const std::string& text, int64_t step, double wall_time) {
  std::string plugin_data, metadata, shape, dim, tensor, v;
  put_bytes(plugin_data, 1, "text");
  put_bytes(metadata, 1, plugin_data);
  put_key(dim, 1, 0);
  put_varint(dim, 1);
  put_bytes(shape, 2, dim);
  put_key(tensor, 1, 0);
  put_varint(tensor, 7);  // DT_STRING
  put_bytes(tensor, 2, shape);
  put_bytes(tensor, 8, text);
  put_bytes(v, 1, tag + "/text_summary");
  put_bytes(v, 8, tensor);
  put_bytes(v, 9, metadata);
  return summary_event(v, step, wall_time);
}

EventFileWriter::EventFileWriter(const std::string& log_dir) {
  static std::atomic<int> counter{0};
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  if (ec) throw RuntimeFailure("cannot create TensorBoard logging_dir '" + log_dir + "': " + ec.message());
  const double now = now_seconds();
  char name[512];
  std::snprintf(name, sizeof(name), "events.out.tfevents.%010lld.%s.%d.%d", static_cast<long long>(now),
                host_name().c_str(), static_cast<int>(getpid()), counter++);
  file_ = std::make_unique<TFRecordWriter>((std::filesystem::path(log_dir) / name).string());
  file_->write(encode_file_version_event(now));
  file_->flush();
}

EventFileWriter::~EventFileWriter() = default;

void EventFileWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  file_->write(encode_scalar_event(tag, static_cast<float>(value), step, now_seconds()));
}

void EventFileWriter::add_text(const std::string& tag, const std::string& text, int64_t step) {
  file_->write(encode_text_event(tag, text, step, now_seconds()));
}

void EventFileWriter::flush() { file_->flush(); }

const std::string& EventFileWriter::path() const { return file_->path(); }

}  // namespace hftrain
