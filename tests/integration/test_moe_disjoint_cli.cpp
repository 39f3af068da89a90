// ZeRO-3 where the two ranks' tokens route to disjoint experts, through the real binary: a mixtral directory whose
// router sends lowercase bytes to experts 0-2 and uppercase bytes to experts 3-5, and a jsonl file laid out so that
// the seeded sampler deals the lowercase rows to rank 0 and the uppercase rows to rank 1. Each rank's debug log
// shows its own per-expert counts (so the test sees that the routing was disjoint at every step); the run finishes
// under a short ddp_timeout (a collective the ranks disagreed on would fail it) and its loss and grad_norm follow 1
// worker over the same global batch; so does the run with expert parallelism 2, whose exchanges then carry no row,
// and, at ZeRO-2 with each member's experts held by its own ranks only, on 2 workers and on 4 (two groups).
#include <catch2/catch.hpp>

#include <regex>

#include "checkpoint/safetensors.h"
#include "data/loader.h"
#include "test_dist_helpers.h"

using namespace hftrain_test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr int64_t kHidden = 16, kInner = 16, kExperts = 6, kVocab = 256, kLayers = 2;

// The sign of hidden dimension 0 decides a token's experts: lowercase bytes carry +2 there and the first half of
// the router's rows weigh it by +2, uppercase bytes -2 and the second half by -2; the other dimensions are noise
// that picks among the half (two of three), far too small to cross to the other half.
hftrain::NamedTensors disjoint_routing_weights() {
  auto gen = at::detail::createCPUGenerator(2024);
  auto normal = [&](std::vector<int64_t> shape, double std) { return at::normal(0.0, std, shape, gen); };
  hftrain::NamedTensors w;
  torch::Tensor embed = normal({kVocab, kHidden}, 0.3);
  embed.slice(0, 'a', 'z' + 1).select(1, 0).fill_(2.0);
  embed.slice(0, 'A', 'Z' + 1).select(1, 0).fill_(-2.0);
  w.emplace_back("model.embed_tokens.weight", embed);
  for (int64_t i = 0; i < kLayers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    w.emplace_back(p + "input_layernorm.weight", torch::ones({kHidden}));
    w.emplace_back(p + "post_attention_layernorm.weight", torch::ones({kHidden}));
    for (const auto& [name, rows] : std::vector<std::pair<std::string, int64_t>>{{"q", 16}, {"k", 8}, {"v", 8}, {"o", 16}})
      w.emplace_back(p + "self_attn." + name + "_proj.weight", normal({rows, kHidden}, 0.02));
    const std::string b = p + "block_sparse_moe.";
    torch::Tensor gate = normal({kExperts, kHidden}, 0.3);
    gate.slice(0, 0, kExperts / 2).select(1, 0).fill_(2.0);
    gate.slice(0, kExperts / 2, kExperts).select(1, 0).fill_(-2.0);
    w.emplace_back(b + "gate.weight", gate);
    for (int64_t e = 0; e < kExperts; ++e) {
      const std::string x = b + "experts." + std::to_string(e) + ".";
      w.emplace_back(x + "w1.weight", normal({kInner, kHidden}, 0.02));
      w.emplace_back(x + "w3.weight", normal({kInner, kHidden}, 0.02));
      w.emplace_back(x + "w2.weight", normal({kHidden, kInner}, 0.02));
    }
  }
  w.emplace_back("model.norm.weight", torch::ones({kHidden}));
  w.emplace_back("lm_head.weight", normal({kVocab, kHidden}, 0.02));
  return w;
}

// 64 rows of 12 letters: the rows the sampler's first epoch deals to rank 0 of 2 lowercase, to rank 1 uppercase.
std::string disjoint_rows(int64_t seed, int64_t world = 2) {
  const int64_t n = 64;
  const std::vector<int64_t> order = hftrain::epoch_order(n, /*shuffle=*/true, seed, /*epoch=*/0);
  std::vector<char> first(static_cast<std::size_t>(n), 'a');
  for (int64_t rank = 1; rank < world; rank += 2)  // the odd ranks' rows
    for (int64_t i : hftrain::distributed_shard(order, world, rank, /*drop_last=*/false)) first[static_cast<std::size_t>(i)] = 'A';
  std::string text;
  for (int64_t i = 0; i < n; ++i) {
    std::string row;
    for (int64_t j = 0; j < 12; ++j) row += static_cast<char>(first[static_cast<std::size_t>(i)] + (i * 7 + j * j * 3) % 16);
    text += json({{"text", row}}).dump() + "\n";
  }
  return text;
}

// Each rank's per-expert slot counts at every log, from its debug line.
std::map<int, std::vector<std::vector<double>>> rank_counts(const std::string& output) {
  std::map<int, std::vector<std::vector<double>>> counts;
  const std::regex line("(\\[rank (\\d+)\\] )?debug: this rank's reported scalars[^\n]*");
  const std::regex fraction("expert_fraction_(\\d+) ([0-9.eE+-]+)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it) {
    const int rank = (*it)[2].matched ? std::stoi((*it)[2].str()) : 0;
    const std::string text = it->str();
    std::vector<double> per_expert(static_cast<std::size_t>(kExperts), -1.0);
    for (auto f = std::sregex_iterator(text.begin(), text.end(), fraction); f != std::sregex_iterator(); ++f)
      per_expert.at(std::stoul((*f)[1].str())) = std::stod((*f)[2].str());
    counts[rank].push_back(per_expert);
  }
  return counts;
}

}  // namespace

TEST_CASE("mixtral at ZeRO-3 on 2 workers whose tokens route to disjoint experts finishes and follows 1 worker, with "
          "expert parallelism too, and with the experts apart at ZeRO-2 on 2 and 4 workers",
          "[integration][moe][zero3]") {
  const std::string dir = dist_dir("moe_disjoint");
  fs::create_directories(dir + "/disjoint");
  write_text(dir + "/disjoint/config.json",
             json({{"model_type", "mixtral"}, {"architectures", json::array({"MixtralForCausalLM"})}, {"vocab_size", kVocab},
                   {"hidden_size", kHidden}, {"intermediate_size", kInner}, {"num_hidden_layers", kLayers},
                   {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"max_position_embeddings", 64},
                   {"num_local_experts", kExperts}, {"num_experts_per_tok", 2}, {"rms_norm_eps", 1e-5},
                   {"rope_theta", 10000.0}, {"sliding_window", nullptr}, {"tie_word_embeddings", false},
                   {"output_router_logits", true}, {"router_aux_loss_coef", 0.01}, {"hidden_act", "silu"}})
                 .dump());
  hftrain::save_safetensors(dir + "/disjoint/model.safetensors", disjoint_routing_weights());
  write_text(dir + "/train.jsonl", disjoint_rows(42));
  write_text(dir + "/spec.yaml",
             "model: {from_pretrained: disjoint}\n"
             "data: {type: jsonl, train_file: train.jsonl, tokenizer: bytes}\n"
             "training: {output_dir: out, seed: 42, per_device_train_batch_size: 1, gradient_accumulation_steps: 2, "
             "max_steps: 20, learning_rate: 0.001, max_grad_norm: 1.0, logging_steps: 1, save_strategy: \"no\", "
             "log_level: debug, log_level_replica: debug}\n"
             "distributed: {ddp_timeout: 30}\n"
             "zero: {stage3_param_persistence_threshold: 20}\n");
  run_ok("train spec.yaml --set training.output_dir=ref", dir);
  const std::string output = run_ok("train spec.yaml --nproc-per-node 2 --set zero.stage=3 "
                                    "--set training.gradient_accumulation_steps=1 --set training.output_dir=z3",
                                    dir);
  INFO(output);
  CHECK_THAT(output, Catch::Contains("parameters gathered per module"));
  // the routing was disjoint at every step: rank 0's slots all in experts 0-2, rank 1's all in 3-5
  const auto counts = rank_counts(output);
  REQUIRE(counts.count(0) == 1);
  REQUIRE(counts.count(1) == 1);
  for (int rank : {0, 1}) {
    REQUIRE(counts.at(rank).size() == 20u);
    for (const std::vector<double>& step : counts.at(rank)) {
      double own = 0, other = 0;
      for (int64_t e = 0; e < kExperts; ++e) (((e < kExperts / 2) == (rank == 0)) ? own : other) += step[static_cast<std::size_t>(e)];
      CHECK(own == Approx(1.0).margin(1e-5));  // the log prints 6 decimals
      CHECK(other == 0.0);
    }
  }
  const std::vector<json> expected = train_logs(dir + "/ref/trainer_state.json"), got = train_logs(dir + "/z3/trainer_state.json");
  REQUIRE(got.size() == 20u);
  REQUIRE(expected.size() == got.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("step " << got[i]["step"]);
    CHECK(got[i]["loss"].get<double>() == Approx(expected[i]["loss"].get<double>()).epsilon(1e-4));
    CHECK(got[i]["grad_norm"].get<double>() == Approx(expected[i]["grad_norm"].get<double>()).epsilon(1e-4));
    for (int64_t e = 0; e < kExperts; ++e) {  // the logged shares: the mean over the ranks, as 1 worker's over its window
      const std::string name = "expert_fraction_" + std::to_string(e);
      REQUIRE(got[i].contains(name));
      CHECK(got[i][name].get<double>() == Approx(expected[i][name].get<double>()).margin(2e-4));
    }
  }
  // With expert parallelism 2 each rank runs the experts its own tokens chose: every exchange sends the other rank
  // no row (segments of length 0), and the run still follows 1 worker.
  run_ok("train spec.yaml --nproc-per-node 2 --set zero.stage=3 --set distributed.expert_parallel_size=2 "
         "--set training.gradient_accumulation_steps=1 --set training.output_dir=ep",
         dir);
  const std::vector<json> parallel = train_logs(dir + "/ep/trainer_state.json");
  REQUIRE(parallel.size() == expected.size());
  for (std::size_t i = 0; i < parallel.size(); ++i) {
    INFO("expert parallel, step " << parallel[i]["step"]);
    CHECK(parallel[i]["loss"].get<double>() == Approx(expected[i]["loss"].get<double>()).epsilon(1e-4));
    CHECK(parallel[i]["grad_norm"].get<double>() == Approx(expected[i]["grad_norm"].get<double>()).epsilon(1e-4));
  }
  // At ZeRO-2 each member's experts live on its own ranks only (expert data parallelism): rank 0 holds and runs
  // experts 0-2, rank 1 experts 3-5, and each trains only its own. On 4 workers (groups {0, 1} and {2, 3}) the even
  // ranks' rows choose experts 0-2 and the odd ranks' 3-5, against 1 worker over the same 4 rows a step.
  auto follows = [&](const std::string& run, const std::string& reference) {
    const std::vector<json> want = train_logs(dir + "/" + reference + "/trainer_state.json"),
                            have = train_logs(dir + "/" + run + "/trainer_state.json");
    REQUIRE(have.size() == 20u);
    REQUIRE(want.size() == have.size());
    for (std::size_t i = 0; i < have.size(); ++i) {
      INFO(run << ", step " << have[i]["step"]);
      CHECK(have[i]["loss"].get<double>() == Approx(want[i]["loss"].get<double>()).epsilon(1e-4));
      CHECK(have[i]["grad_norm"].get<double>() == Approx(want[i]["grad_norm"].get<double>()).epsilon(1e-4));
    }
  };
  const std::string apart = run_ok("train spec.yaml --nproc-per-node 2 --set zero.stage=2 --set distributed.expert_parallel_size=2 "
                                   "--set training.gradient_accumulation_steps=1 --set training.output_dir=ep_apart", dir);
  CHECK_THAT(apart, Catch::Contains("expert elements here"));
  follows("ep_apart", "ref");
  write_text(dir + "/train.jsonl", disjoint_rows(42, 4));
  run_ok("train spec.yaml --set training.gradient_accumulation_steps=4 --set training.output_dir=ref4", dir);
  run_ok("train spec.yaml --nproc-per-node 4 --set zero.stage=2 --set distributed.expert_parallel_size=2 "
         "--set training.gradient_accumulation_steps=1 --set training.output_dir=ep_four", dir);
  follows("ep_four", "ref4");
  fs::remove_all(dir);
}
