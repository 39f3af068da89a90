// TensorBoard event files written directly: TFRecord framing (tfrecord.h) of tensorflow.Event protos
// encoded by hand (wall_time = 1, step = 2, file_version = 3, summary = 5; Summary.value = 1;
// Value.tag = 1, simple_value = 2, tensor = 8, metadata = 9). The first record is the file_version
// event "brain.Event:2", and the file name follows PyTorch's SummaryWriter:
// events.out.tfevents.<10-digit unix time>.<host>.<pid>.<n>.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace hftrain {

class TFRecordWriter;

// HF rewrite_logs: "eval_x" -> "eval/x", "test_x" -> "test/x", anything else "k" -> "train/k".
std::string tensorboard_tag(const std::string& key);

// HF's default logging_dir: <output_dir>/runs/<Mon DD_HH-MM-SS>_<host> (strftime "%b%d_%H-%M-%S").
std::string default_logging_dir(const std::string& output_dir);

// The serialized Event protos (exposed for tests).
std::string encode_file_version_event(double wall_time);
std::string encode_scalar_event(const std::string& tag, float value, int64_t step, double wall_time);
// A text summary as PyTorch's add_text writes it: tag "<tag>/text_summary", plugin "text", a DT_STRING tensor of shape [1].
std::string encode_text_event(const std::string& tag, const std::string& text, int64_t step, double wall_time);

class EventFileWriter {
 public:
  // Creates `log_dir` and a new event file in it holding the file_version record.
  explicit EventFileWriter(const std::string& log_dir);
  ~EventFileWriter();
  void add_scalar(const std::string& tag, double value, int64_t step);
  void add_text(const std::string& tag, const std::string& text, int64_t step);
  void flush();
  const std::string& path() const;

 private:
  std::unique_ptr<TFRecordWriter> file_;
};

}  // namespace hftrain
