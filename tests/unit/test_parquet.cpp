// The columnar layer's decoders on hand-made bytes (torch-free): Thrift compact page headers (short and long
// field ids, unknown fields skipped), the RLE / bit-packed hybrid, DELTA_BINARY_PACKED (Encodings.md's
// examples), and corrupt or truncated parquet / Arrow files refused with a ConfigError naming the file, never
// read past their end. Files from independent writers: tests/integration/test_columnar_data.cpp.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "columnar/arrow_stream.h"
#include "columnar/parquet_metadata.h"
#include "columnar/parquet_reader.h"
#include "columnar/parquet_values.h"
#include "columnar/rle_hybrid.h"
#include "util/error.h"

using namespace hftrain;

namespace {

Bytes bytes_of(const std::vector<uint8_t>& v) { return Bytes(v); }

std::string scratch_file(const std::string& name, const std::vector<uint8_t>& data) {
  const auto path = std::filesystem::temp_directory_path() / ("hftrain_parquet_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  return path.string();
}

// A data page header: type DATA_PAGE, sizes 10, DataPageHeader{3 values, PLAIN, RLE, RLE}, then field 100 (an
// i64 this reader does not know, written with the long field-id form) and the stop byte.
const std::vector<uint8_t> kPageHeader = {0x15, 0x00, 0x15, 0x14, 0x15, 0x14, 0x2C, 0x15, 0x06, 0x15, 0x00, 0x15,
                                          0x06, 0x15, 0x06, 0x00, 0x06, 0xC8, 0x01, 0x02, 0x00};

}  // namespace

TEST_CASE("thrift compact page headers decode, unknown fields skipped", "[unit][columnar]") {
  ByteCursor in(bytes_of(kPageHeader), "page header");
  const PageHeader h = parse_page_header(in);
  CHECK(h.type == PageType::kData);
  CHECK(h.uncompressed_size == 10);
  CHECK(h.compressed_size == 10);
  CHECK(h.num_values == 3);
  CHECK(h.encoding == 0);
  CHECK(h.def_encoding == 3);
  CHECK(in.at_end());
  // Every cut of the header is refused as truncated, never read past.
  for (std::size_t n = 0; n < kPageHeader.size(); ++n) {
    std::vector<uint8_t> cut(kPageHeader.begin(), kPageHeader.begin() + static_cast<std::ptrdiff_t>(n));
    ByteCursor c(bytes_of(cut), "page header");
    CHECK_THROWS_AS(parse_page_header(c), ConfigError);
  }
}

TEST_CASE("the RLE / bit-packed hybrid decodes RLE and bit-packed runs", "[unit][columnar]") {
  // RLE run of 8 x 4 (width 3: one value byte), then a bit-packed group of 0..7 (Encodings.md's bytes).
  const std::vector<uint8_t> data = {0x10, 0x04, 0x03, 0x88, 0xC6, 0xFA};
  ByteCursor in(bytes_of(data), "levels");
  std::vector<uint32_t> out;
  decode_rle_hybrid(in, 3, 16, out);
  CHECK(out == std::vector<uint32_t>{4, 4, 4, 4, 4, 4, 4, 4, 0, 1, 2, 3, 4, 5, 6, 7});
  ByteCursor short_in(bytes_of(data), "levels");
  CHECK_THROWS_AS(decode_rle_hybrid(short_in, 3, 17, out), ConfigError);  // the runs end before 17 values
}

TEST_CASE("DELTA_BINARY_PACKED decodes Encodings.md's examples", "[unit][columnar]") {
  // 1 2 3 4 5: block 128, 4 miniblocks, 5 values, first 1; min delta 1, widths 0.
  std::vector<uint8_t> a = {0x80, 0x01, 0x04, 0x05, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00};
  ByteCursor in_a(bytes_of(a), "delta");
  std::vector<int64_t> out;
  decode_delta_binary_packed(in_a, out);
  CHECK(out == std::vector<int64_t>{1, 2, 3, 4, 5});
  // 7 5 3 1 2 3 4 5: min delta -2, relative deltas 0 0 0 3 3 3 3 at width 2 in the first miniblock.
  std::vector<uint8_t> b = {0x80, 0x01, 0x04, 0x08, 0x0E, 0x03, 0x02, 0x00, 0x00, 0x00, 0xC0, 0x3F, 0, 0, 0, 0, 0, 0};
  ByteCursor in_b(bytes_of(b), "delta");
  out.clear();
  decode_delta_binary_packed(in_b, out);
  CHECK(out == std::vector<int64_t>{7, 5, 3, 1, 2, 3, 4, 5});
  CHECK(in_b.at_end());
  b.pop_back();  // the miniblock cut short
  ByteCursor in_c(bytes_of(b), "delta");
  CHECK_THROWS_AS(decode_delta_binary_packed(in_c, out), ConfigError);
}

TEST_CASE("corrupt parquet and Arrow files are refused naming the file, never read past their end", "[unit][columnar]") {
  auto message_of = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string missing_footer = scratch_file("a.parquet", {'P', 'A', 'R', '1', 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK_THAT(message_of([&] { read_parquet_rows(missing_footer); }),
             Catch::Contains("a.parquet") && Catch::Contains("truncated"));
  const std::string long_footer = scratch_file("b.parquet", {'P', 'A', 'R', '1', 0, 0, 0, 0, 0xFF, 0xFF, 0, 0, 'P', 'A', 'R', '1'});
  CHECK_THAT(message_of([&] { read_parquet_rows(long_footer); }), Catch::Contains("b.parquet") && Catch::Contains("footer length"));
  const std::string no_eos = scratch_file("c.arrow", {0xFF, 0xFF, 0xFF, 0xFF, 0x40, 0, 0, 0, 1, 2});
  CHECK_THAT(message_of([&] { read_arrow_stream_rows(no_eos); }), Catch::Contains("c.arrow") && Catch::Contains("past the end"));

  // Random bodies between valid magic bytes: a ConfigError every time, nothing else (and no crash).
  std::mt19937 rng(7);
  for (int k = 0; k < 300; ++k) {
    std::vector<uint8_t> body(8 + rng() % 120);
    for (auto& x : body) x = static_cast<uint8_t>(rng());
    std::vector<uint8_t> pq = {'P', 'A', 'R', '1'};
    pq.insert(pq.end(), body.begin(), body.end());
    const uint32_t footer = static_cast<uint32_t>(rng() % body.size());
    for (int i = 0; i < 4; ++i) pq.push_back(static_cast<uint8_t>(footer >> (8 * i)));
    pq.insert(pq.end(), {'P', 'A', 'R', '1'});
    CHECK_THROWS_AS(read_parquet_rows(scratch_file("fuzz.parquet", pq)), ConfigError);
    std::vector<uint8_t> ar = {0xFF, 0xFF, 0xFF, 0xFF, static_cast<uint8_t>(body.size() - 4), 0, 0, 0};
    ar.insert(ar.end(), body.begin(), body.end());
    CHECK_THROWS_AS(read_arrow_stream_rows(scratch_file("fuzz.arrow", ar)), ConfigError);
  }
}
