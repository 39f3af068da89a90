// The hftrain side of tests/reference/quant_reference.py (hidden: run by that script, which sets
// HFTRAIN_QUANT_REFERENCE_DIR): quantises each input of inputs.safetensors as cases.json says and writes
// codes, block absmax and the dequantised values to hftrain_output.safetensors for the script to compare.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>

#include "checkpoint/safetensors.h"
#include "optim/blockwise_quant.h"
#include "util/fs.h"

using namespace hftrain;

TEST_CASE("Block-wise quantisation of the reference table (driven by quant_reference.py)", "[.][quant_ref]") {
  const char* root = std::getenv("HFTRAIN_QUANT_REFERENCE_DIR");
  REQUIRE(root != nullptr);
  const std::string dir(root);
  const auto cases = nlohmann::json::parse(read_text_file(dir + "/cases.json"));
  const auto inputs = load_safetensors(dir + "/inputs.safetensors").tensors;
  NamedTensors out;
  for (const auto& c : cases) {
    const std::string name = c["name"].get<std::string>();
    const QuantSign sign = c["signed"].get<bool>() ? QuantSign::kSigned : QuantSign::kUnsigned;
    const int64_t block = c["block_size"].get<int64_t>();
    const QuantizedTensor q = quantize_blockwise(inputs.at(name), sign, block);
    out.emplace_back(name + ".codes", q.codes);
    out.emplace_back(name + ".absmax", q.absmax);
    out.emplace_back(name + ".dequantized", dequantize_blockwise(q, sign, block));
  }
  save_safetensors(dir + "/hftrain_output.safetensors", out);
}
