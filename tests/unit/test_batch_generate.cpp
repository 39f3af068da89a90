// Batched generation (generate/batch_generate.h) against one prompt at a time (generate(), whose greedy
// and beam numerics tests/reference/beam_search_reference.py checks against an independent Python
// implementation): every generating family, prompts of mixed lengths at batch 1, 7 and 16, rows that
// stop early at an eos taken from the unbatched output, HF's no_repeat_ngram processor, and sampling's
// determinism under one seed; batched beam search against beam_search prompt by prompt.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "generate/batch_generate.h"
#include "generate/beam_search.h"
#include "seq2seq_model_helpers.h"

using namespace hftrain;

namespace {

const std::map<std::string, std::string>& families() {
  static const std::map<std::string, std::string> f = {
      {"gpt", "{vocab_size: 29, block_size: 64, n_layer: 2, n_head: 2, n_embd: 16, dropout: 0}"},
      {"gpt2", "{vocab_size: 29, n_positions: 64, n_embd: 32, n_layer: 2, n_head: 4, resid_pdrop: 0, embd_pdrop: 0, attn_pdrop: 0}"},
      {"llama", "{vocab_size: 29, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, "
                "num_key_value_heads: 2, max_position_embeddings: 64}"},
      {"t5", "{vocab_size: 29, d_model: 32, d_kv: 8, d_ff: 48, num_layers: 2, num_decoder_layers: 2, num_heads: 4, "
             "relative_attention_num_buckets: 8, relative_attention_max_distance: 16, dropout_rate: 0}"},
      {"bart", "{vocab_size: 29, d_model: 24, encoder_layers: 2, decoder_layers: 2, encoder_attention_heads: 4, "
               "decoder_attention_heads: 2, encoder_ffn_dim: 40, decoder_ffn_dim: 36, max_position_embeddings: 64, dropout: 0, "
               "init_std: 0.3}"}};  // weights large enough that the source steers the output
  return f;
}

// `n` prompts of lengths 1..13 with ids in [3, 29).
std::vector<std::vector<int64_t>> prompts(std::size_t n) {
  std::vector<std::vector<int64_t>> out;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<int64_t> p;
    for (std::size_t t = 0; t < 1 + (i * 5) % 13; ++t) p.push_back(3 + static_cast<int64_t>((i * 7 + t * 3) % 26));
    out.push_back(p);
  }
  return out;
}

std::vector<std::vector<int64_t>> one_at_a_time(Model& model, const std::vector<std::vector<int64_t>>& ps,
                                                const GenerationConfig& config) {
  at::Generator unused = make_generator(0);
  std::vector<std::vector<int64_t>> out;
  for (const auto& p : ps) out.push_back(generate(model, p, config, unused));
  return out;
}

// The token whose first occurrence in `outputs` falls on the most different steps (absent = the full length).
int64_t eos_spreading_stops(const std::vector<std::vector<int64_t>>& outputs) {
  std::set<int64_t> tokens;
  for (const auto& seq : outputs) tokens.insert(seq.begin(), seq.end());
  int64_t best = 0;
  std::size_t best_spread = 0;
  for (int64_t token : tokens) {
    std::set<std::size_t> stops;
    for (const auto& seq : outputs) stops.insert(std::find(seq.begin(), seq.end(), token) - seq.begin());
    if (stops.size() > best_spread) {
      best_spread = stops.size();
      best = token;
    }
  }
  return best;
}

}  // namespace

TEST_CASE("batched greedy generation equals one prompt at a time in every generating family", "[unit][generate]") {
  for (const auto& [family, options] : families()) {
    auto model = hftrain_test::build_model(family, options, 11);
    model->eval();
    for (const std::size_t batch : {1, 7, 16}) {
      INFO(family << " batch " << batch);
      const auto ps = prompts(batch);
      GenerationConfig config;
      config.max_new_tokens = 9;
      const auto expected = one_at_a_time(*model, ps, config);
      at::Generator generator = make_generator(0);
      CHECK(generate_batch(*model, ps, config, generator) == expected);
      // An eos that makes rows stop at different steps (and leave the batch) while the others go on: of the
      // tokens the unbatched outputs hold, the one whose first occurrences are spread over the most steps.
      config.eos_token_id = eos_spreading_stops(expected);
      config.no_repeat_ngram_size = 3;
      const auto stopping = one_at_a_time(*model, ps, config);
      CHECK(generate_batch(*model, ps, config, generator) == stopping);
      if (batch > 1) {
        std::set<std::size_t> lengths;
        for (const auto& seq : stopping) lengths.insert(seq.size());
        CHECK(lengths.size() > 1);  // rows finished at different steps
      }
    }
  }
}

TEST_CASE("batched sampling is one seeded stream over the rows", "[unit][generate]") {
  auto model = hftrain_test::build_model("gpt2", families().at("gpt2"), 4);
  model->eval();
  GenerationConfig config;
  config.max_new_tokens = 6;
  config.do_sample = true;
  config.top_k = 10;
  const auto ps = prompts(5);
  at::Generator a = make_generator(123), b = make_generator(123), c = make_generator(124);
  const auto first = generate_batch(*model, ps, config, a);
  CHECK(generate_batch(*model, ps, config, b) == first);
  CHECK(generate_batch(*model, ps, config, c) != first);
  for (const auto& seq : first) {
    CHECK(seq.size() == 6);
    for (int64_t t : seq) CHECK((t >= 0 && t < 29));
  }
}

TEST_CASE("batched beam search finds the hypotheses of one prompt at a time in every generating family", "[unit][generate]") {
  for (const auto& [family, options] : families()) {
    auto model = hftrain_test::build_model(family, options, 13);
    model->eval();
    for (const std::size_t batch : {1, 7}) {
      INFO(family << " batch " << batch);
      const auto ps = prompts(batch);
      GenerationConfig config;
      config.max_new_tokens = 6;
      config.num_beams = 3;
      config.num_return_sequences = 2;
      // An eos the beams meet at different steps (taken from the greedy outputs).
      GenerationConfig greedy;
      greedy.max_new_tokens = 6;
      config.eos_token_id = eos_spreading_stops(one_at_a_time(*model, ps, greedy));
      const auto together = beam_search_batch(*model, ps, config);
      REQUIRE(together.size() == ps.size());
      for (std::size_t i = 0; i < ps.size(); ++i) {
        INFO("prompt " << i);
        const auto alone = beam_search(*model, ps[i], config);
        REQUIRE(together[i].size() == alone.size());
        for (std::size_t h = 0; h < alone.size(); ++h) {
          CHECK(together[i][h].tokens == alone[h].tokens);
          CHECK(together[i][h].score == Approx(alone[h].score).margin(1e-5));
        }
      }
    }
  }
}

TEST_CASE("generation settings are the run spec's: max_new_tokens wins over max_length and early_stopping is checked",
          "[unit][generate]") {
  GenerationArgs spec;
  spec.num_beams = 3;
  spec.early_stopping = "never";
  GenerationConfig config{spec};  // the spec's settings plus the model's max_context
  CHECK(config.num_beams == 3);
  CHECK(config.early_stopping == "never");
  CHECK(new_token_budget(config, 3) == kDefaultMaxNewTokens);  // neither set: HF's default
  config.max_length = 20;
  CHECK(new_token_budget(config, 3) == 17);  // max_length counts the prompt
  config.max_new_tokens = 5;
  CHECK(new_token_budget(config, 3) == 5);  // HF: max_new_tokens wins when both are set
  config.early_stopping = "sometimes";
  CHECK_THROWS_WITH(validate_generation_config(config), Catch::Contains("generation.early_stopping"));
}
