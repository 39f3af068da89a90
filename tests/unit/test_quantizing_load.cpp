// QLoRA's base quantised as it is read (checkpoint/quantizing_load): a llama built with its parameters released and
// filled from an HF directory a parameter at a time, each selected linear quantised as it arrives, holds the same
// codes, scales and unquantised tensors, bit for bit, as the model loaded whole and quantised after (NF4 with double
// quantisation, and LLM.int8()); a model starting from its own initialisation likewise; refused when built whole.
#include <catch2/catch.hpp>

#include "checkpoint/model_io.h"
#include "checkpoint/quantizing_load.h"
#include "models/quantize_model.h"
#include "seq2seq_model_helpers.h"

using namespace hftrain;

namespace {

const char* kStreamedLlama = "{hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 4, "
                     "num_key_value_heads: 2, vocab_size: 48, max_position_embeddings: 32}";

QuantizationArgs streamed_four_bit() {
  QuantizationArgs a;
  a.load_in_4bit = true, a.bnb_4bit_quant_type = "nf4", a.bnb_4bit_use_double_quant = true;
  return a;
}

QuantizationArgs streamed_eight_bit() {
  QuantizationArgs a;
  a.load_in_8bit = true;
  return a;
}

std::shared_ptr<Model> deferred_llama(uint64_t seed) {
  DeferredInit deferred(true);
  auto m = hftrain_test::build_model("llama", kStreamedLlama, seed);
  REQUIRE(m->initialisation_deferred());
  return m;
}

// Every parameter and buffer, and every quantised weight's codes and scales, equal bit for bit.
void check_same_quantised(Model& got, Model& want) {
  auto a = hftrain_test::parameters_by_name(got), b = hftrain_test::parameters_by_name(want);
  REQUIRE(a.size() == b.size());
  for (const auto& [name, t] : b) {
    INFO(name);
    CHECK(torch::equal(a.at(name), t));
  }
  const auto qa = quantized_weights(got), qb = quantized_weights(want);
  REQUIRE(qa.size() == qb.size());
  REQUIRE(!qb.empty());
  for (const auto& [name, q] : qb) {
    INFO(name);
    CHECK(torch::equal(qa.at(name)->packed, q->packed));
    CHECK(torch::equal(qa.at(name)->absmax, q->absmax));
  }
}

}  // namespace

TEST_CASE("quantising a llama as its weights are read equals loading it whole and quantising it after",
          "[unit][qlora][int8]") {
  const std::string dir = hftrain_test::scratch_dir("quantizing_load", "base");
  {
    auto source = hftrain_test::build_model("llama", kStreamedLlama, 3);
    save_model_dir(dir, *source);
  }
  for (const QuantizationArgs& args : {streamed_four_bit(), streamed_eight_bit()}) {
    INFO((args.load_in_8bit ? "8-bit" : "4-bit"));
    auto whole = hftrain_test::build_model("llama", kStreamedLlama, 11);
    load_pretrained_dir(dir, *whole);
    quantize_linear_layers(*whole, args);
    auto streamed = deferred_llama(11);
    CHECK(load_pretrained_quantizing(dir, *streamed, args) == 14);  // 7 linears a layer, the head left out
    CHECK(!streamed->initialisation_deferred());
    check_same_quantised(*streamed, *whole);
    // from the model's own initialisation: the same draws as the whole construction, each weight quantised as drawn
    auto drawn_whole = hftrain_test::build_model("llama", kStreamedLlama, 5);
    quantize_linear_layers(*drawn_whole, args);
    auto drawn = deferred_llama(5);
    load_pretrained_quantizing("", *drawn, args);
    check_same_quantised(*drawn, *drawn_whole);
  }
  auto built_whole = hftrain_test::build_model("llama", kStreamedLlama, 1);
  CHECK_THROWS_WITH(load_pretrained_quantizing(dir, *built_whole, streamed_four_bit()), Catch::Contains("built whole, not deferred"));
  std::filesystem::remove_all(dir);
}
