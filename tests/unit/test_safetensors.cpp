// safetensors: round trip of every supported dtype, and a table of malformed files that must be
// rejected with a clear error (never a crash or an out-of-bounds read).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "checkpoint/safetensors.h"
#include "util/error.h"

using namespace hftrain;

namespace {

std::vector<char> make_file(const std::string& header, std::size_t data_bytes) {
  std::vector<char> bytes(8 + header.size() + data_bytes, 0);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  return bytes;
}

}  // namespace

TEST_CASE("safetensors round-trips tensors of every dtype bitwise", "[unit][safetensors]") {
  auto path = (std::filesystem::temp_directory_path() / ("hftrain_roundtrip_" + std::to_string(::getpid()) + ".safetensors")).string();
  NamedTensors tensors = {
      {"f32", torch::randn({3, 4})},
      {"f64", torch::randn({2}, torch::kFloat64)},
      {"bf16", torch::randn({5}).to(torch::kBFloat16)},
      {"f16", torch::randn({2, 2}).to(torch::kFloat16)},
      {"i64", torch::arange(7, torch::kLong)},
      {"u8", torch::arange(9, torch::kUInt8)},
      {"scalar", torch::tensor(3.5f)},
      {"empty", torch::zeros({0, 3})},
      {"noncontig", torch::randn({4, 3}).t()},
  };
  save_safetensors(path, tensors, {{"format", "pt"}, {"note", "x"}});
  SafetensorsFile f = load_safetensors(path);
  CHECK(f.metadata.at("note") == "x");
  REQUIRE(f.tensors.size() == tensors.size());
  for (const auto& [name, t] : tensors) {
    INFO(name);
    const auto& back = f.tensors.at(name);
    CHECK(back.scalar_type() == t.scalar_type());
    CHECK(back.sizes().vec() == t.sizes().vec());
    CHECK(torch::equal(back, t.contiguous()));
  }
  // Header is 8-byte aligned, as the reference implementation writes it.
  auto bytes = std::filesystem::file_size(path);
  CHECK(bytes > 8);
}

TEST_CASE("malformed safetensors files are rejected with a message naming the problem", "[unit][safetensors]") {
  struct Case {
    const char* what;
    std::vector<char> bytes;
    const char* expected;
  };
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::vector<Case> cases = {
      {"empty file", {}, "too short for a header"},
      {"header length beyond file", make_file(ok, 8), ""},
      {"invalid JSON", make_file("{not json", 0), "header is not valid JSON"},
      {"header not an object", make_file("[1,2]", 0), "header is not a JSON object"},
      {"unknown dtype", make_file(R"({"a":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}})", 1), "tensor 'a': unsupported dtype 'F8'"},
      {"missing field", make_file(R"({"a":{"dtype":"F32","shape":[1]}})", 4), "tensor 'a': entry needs dtype, shape and data_offsets"},
      {"negative shape", make_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4), "shape entries must be non-negative"},
      {"offsets out of bounds", make_file(ok, 4), "tensor 'a': data_offsets [0, 8] out of bounds"},
      {"size mismatch", make_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "span 8 bytes but shape and dtype need 12"},
      {"overlap", make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12), "overlap"},
      {"gap", make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8), "gap in the data section"},
      {"trailing bytes", make_file(ok, 12), "data section is 12 bytes but tensors cover 8"},
      {"begin after end", make_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8), "out of bounds"},
      {"huge shape", make_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8), "shape is too large"},
  };
  // Corrupt the header length of a valid file so it points past the end.
  cases[1].bytes[0] = static_cast<char>(0xff);
  cases[1].bytes[1] = static_cast<char>(0xff);
  cases[1].expected = "exceeds the file";
  for (const auto& c : cases) {
    INFO(c.what);
    CHECK_THROWS_WITH(parse_safetensors(c.bytes, "bad.safetensors"),
                      Catch::Contains("safetensors file 'bad.safetensors'") && Catch::Contains(c.expected));
  }
}

TEST_CASE("loading a missing safetensors file names the path", "[unit][safetensors]") {
  CHECK_THROWS_WITH(load_safetensors("/nonexistent/model.safetensors"), Catch::Contains("/nonexistent/model.safetensors"));
}

TEST_CASE("a file's header is read alone, with the names, dtypes, shapes and metadata the file holds", "[unit][safetensors]") {
  auto path = (std::filesystem::temp_directory_path() / ("hftrain_header_only_" + std::to_string(::getpid()) + ".safetensors")).string();
  save_safetensors(path, {{"b", torch::zeros({2, 3}, torch::kBFloat16)}, {"a", torch::ones({5}, torch::kFloat)}},
                   {{"format", "pt"}, {"world_size", "2"}});
  const SafetensorsHeader h = read_safetensors_header(path);
  const SafetensorsFile full = load_safetensors(path);
  REQUIRE(h.tensors.size() == full.tensors.size());
  for (const auto& e : h.tensors) {
    INFO(e.name);
    REQUIRE(full.tensors.count(e.name) == 1);
    CHECK(e.shape == full.tensors.at(e.name).sizes().vec());
  }
  CHECK(h.metadata == full.metadata);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "abc";
  CHECK_THROWS_WITH(read_safetensors_header(path), Catch::Contains(path) && Catch::Contains("too short"));
}
