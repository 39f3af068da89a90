// TensorBoard writing: CRC-32C against published check values, TFRecord framing, the Event proto
// bytes (hand-encoded from the protobuf wire format), HF's tag names, and parameter / FLOP / speed
// figures as HF defines them.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstring>

#include "log/crc32c.h"
#include "log/speed_metrics.h"
#include "log/tensorboard_writer.h"
#include "log/tfrecord.h"
#include "models/model.h"
#include "models/parameter_counts.h"

using namespace hftrain;
using json = nlohmann::json;

namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int v : b) s += static_cast<char>(v);
  return s;
}

uint32_t le32(const std::string& s, std::size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(s[at + static_cast<std::size_t>(i)]);
  return v;
}

struct TinyModel : Model {
  torch::nn::Embedding wte{nullptr};
  torch::nn::Linear head{nullptr};
  torch::Tensor frozen;
  TinyModel() {
    wte = register_module("wte", torch::nn::Embedding(10, 4));  // 40, embedding
    head = register_module("head", torch::nn::Linear(4, 3));    // 12 + 3
    frozen = register_parameter("frozen", torch::zeros({5}), /*requires_grad=*/false);
    // An LM head tied to the embedding (as GPT-2's): the same tensor under a later name, counted once
    // and, as HF's dedup keeps the first name, as an embedding weight.
    auto lm_head = register_module("lm_head", std::make_shared<torch::nn::Module>());
    lm_head->register_parameter("weight", wte->weight);
  }
  ModelOutput forward(const Batch&) override { return {}; }
  bool is_causal_lm() const override { return false; }
  nlohmann::json config_json() const override { return {}; }
};

}  // namespace

TEST_CASE("CRC-32C matches the published check values", "[unit][log]") {
  CHECK(crc32c("123456789", 9) == 0xE3069283u);  // the standard check value of CRC-32C
  const std::string zeros(32, '\0');
  CHECK(crc32c(zeros.data(), zeros.size()) == 0x8A9136AAu);  // RFC 3720 B.4
  const std::string ones(32, '\xff');
  CHECK(crc32c(ones.data(), ones.size()) == 0x62A8AB43u);  // RFC 3720 B.4
  const uint32_t c = crc32c("123456789", 9);
  CHECK(masked_crc32c("123456789", 9) == static_cast<uint32_t>(((c >> 15) | (c << 17)) + 0xa282ead8u));
}

TEST_CASE("TFRecord framing: length, masked CRCs, data", "[unit][log]") {
  const std::string data = "hello";
  const std::string framed = tfrecord_frame(data);
  REQUIRE(framed.size() == 8 + 4 + 5 + 4);
  CHECK(framed.substr(0, 8) == bytes({5, 0, 0, 0, 0, 0, 0, 0}));
  CHECK(le32(framed, 8) == masked_crc32c(framed.data(), 8));
  CHECK(framed.substr(12, 5) == data);
  CHECK(le32(framed, 17) == masked_crc32c(data.data(), data.size()));
}

TEST_CASE("Event protos are encoded as the wire format says", "[unit][log]") {
  // Event{wall_time: 0.0 (field 1, fixed64), step: 3 (field 2, varint),
  //       summary (field 5) {value (field 1) {tag "a" (field 1), simple_value 1.0f (field 2, fixed32)}}}
  const std::string expected = bytes({0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0x03, 0x2A, 0x0A, 0x0A, 0x08, 0x0A, 0x01, 'a',
                                      0x15, 0x00, 0x00, 0x80, 0x3F});
  CHECK(encode_scalar_event("a", 1.0f, 3, 0.0) == expected);
  // A step above 127 takes a two-byte varint: 300 = 0xAC 0x02.
  CHECK(encode_scalar_event("a", 1.0f, 300, 0.0).substr(9, 3) == bytes({0x10, 0xAC, 0x02}));
  // file_version event, wall_time 1.5 = 0x3FF8000000000000.
  CHECK(encode_file_version_event(1.5) == bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F, 0x1A, 13}) + "brain.Event:2");
  const std::string text = encode_text_event("args", "x", 0, 0.0);
  CHECK(text.find("args/text_summary") != std::string::npos);
  CHECK(text.find(bytes({0x0A, 0x04}) + "text") != std::string::npos);  // plugin_name "text"
}

TEST_CASE("TensorBoard tags follow HF rewrite_logs", "[unit][log]") {
  CHECK(tensorboard_tag("loss") == "train/loss");
  CHECK(tensorboard_tag("learning_rate") == "train/learning_rate");
  CHECK(tensorboard_tag("epoch") == "train/epoch");
  CHECK(tensorboard_tag("train_runtime") == "train/train_runtime");
  CHECK(tensorboard_tag("eval_loss") == "eval/loss");
  CHECK(tensorboard_tag("eval_exact_match") == "eval/exact_match");
  CHECK(tensorboard_tag("test_accuracy") == "test/accuracy");
  CHECK_THAT(default_logging_dir("out"), Catch::StartsWith("out/runs/"));
}

TEST_CASE("parameter counts, FLOPs and speed metrics as HF defines them", "[unit][log]") {
  TinyModel model;
  const ParameterCounts c = count_parameters(model);
  CHECK(c.total == 40 + 15 + 5);
  CHECK(c.trainable == 40 + 15);
  CHECK(c.non_embedding == 15 + 5);
  CHECK(training_flos(c, 7) == 6.0 * 7 * 20);

  const json m = speed_metrics("train", 2.0, 64, 8, 1000);
  CHECK(m == json{{"train_runtime", 2.0}, {"train_samples_per_second", 32.0}, {"train_steps_per_second", 4.0},
                  {"train_tokens_per_second", 500.0}});
  CHECK(speed_metrics("eval", 3.0, 10, 0) == json{{"eval_runtime", 3.0}, {"eval_samples_per_second", 3.333}});
  CHECK(speed_metrics("eval", 0.0, 10, 1) == json{{"eval_runtime", 0.0}});
}
