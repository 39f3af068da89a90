// The token pickers of the decode loop (see decode.h): greedy decoding or sampling, and beam search
// through BeamState.
#include "generate/beam_state.h"
#include "generate/decode.h"

namespace hftrain {
namespace {

// Greedy decoding or sampling: one row per prompt, which is done after eos or its token budget.
class GreedyOrSamplingPicker : public TokenPicker {
 public:
  GreedyOrSamplingPicker(std::vector<std::vector<int64_t>> starts, const GenerationConfig& config, at::Generator& generator)
      : config_(config), generator_(generator) {
    for (auto& start : starts) {
      Row r;
      r.start_length = static_cast<int64_t>(start.size());
      r.budget = new_token_budget(config, r.start_length);
      r.sequence.push_back(std::move(start));
      rows_.push_back(std::move(r));
    }
  }

  std::size_t prompts() const override { return rows_.size(); }
  int64_t rows_per_prompt() const override { return 1; }
  const std::vector<std::vector<int64_t>>& rows(std::size_t p) const override { return rows_[p].sequence; }
  bool finished(std::size_t p) const override { return rows_[p].done; }

  std::vector<std::vector<int64_t>> pick(const torch::Tensor& logits, const std::vector<std::size_t>& active) override {
    torch::Tensor scores = logits.to(torch::kCPU, torch::kFloat).contiguous();
    for (std::size_t i = 0; i < active.size(); ++i) {
      torch::Tensor row = scores.narrow(0, static_cast<int64_t>(i), 1);
      mask_forbidden_tokens(row, rows_[active[i]].sequence, rows_[active[i]].start_length, config_);
    }
    const std::vector<int64_t> tokens = choose(scores);
    for (std::size_t i = 0; i < active.size(); ++i) {
      Row& r = rows_[active[i]];
      r.sequence.front().push_back(tokens[i]);
      const auto generated = static_cast<int64_t>(r.sequence.front().size()) - r.start_length;
      r.done = (config_.eos_token_id && tokens[i] == *config_.eos_token_id) || generated >= r.budget;
    }
    return std::vector<std::vector<int64_t>>(active.size(), std::vector<int64_t>{0});
  }

  std::vector<GeneratedSequence> result(std::size_t p) override {
    const std::vector<int64_t>& row = rows_[p].sequence.front();
    return {GeneratedSequence{std::vector<int64_t>(row.begin() + rows_[p].start_length, row.end()), 0.0}};
  }

 private:
  struct Row {
    std::vector<std::vector<int64_t>> sequence;  // one: the start, then the picked tokens
    int64_t start_length = 0, budget = 0;
    bool done = false;
  };

  // Each row's argmax, or a draw from softmax(warp_logits) of every row from one multinomial.
  std::vector<int64_t> choose(const torch::Tensor& scores) {
    torch::Tensor picked;
    if (config_.do_sample) {
      std::vector<torch::Tensor> warped;
      for (int64_t i = 0; i < scores.size(0); ++i) warped.push_back(warp_logits(scores[i], config_));
      picked = torch::multinomial(torch::softmax(torch::stack(warped), -1), 1, /*replacement=*/false, generator_).squeeze(1);
    } else {
      picked = scores.argmax(-1);
    }
    picked = picked.contiguous();
    return std::vector<int64_t>(picked.data_ptr<int64_t>(), picked.data_ptr<int64_t>() + picked.numel());
  }

  const GenerationConfig& config_;
  at::Generator& generator_;
  std::vector<Row> rows_;
};

// Beam search: num_beams rows per prompt, each prompt's step by its BeamState.
class BeamPicker : public TokenPicker {
 public:
  BeamPicker(std::vector<std::vector<int64_t>> starts, const GenerationConfig& config) : num_beams_(config.num_beams) {
    for (auto& start : starts) states_.emplace_back(std::move(start), config);
  }

  std::size_t prompts() const override { return states_.size(); }
  int64_t rows_per_prompt() const override { return num_beams_; }
  const std::vector<std::vector<int64_t>>& rows(std::size_t p) const override { return states_[p].beams(); }
  bool finished(std::size_t p) const override { return states_[p].finished(); }

  std::vector<std::vector<int64_t>> pick(const torch::Tensor& logits, const std::vector<std::size_t>& active) override {
    std::vector<std::vector<int64_t>> parents;
    for (std::size_t k = 0; k < active.size(); ++k)
      parents.push_back(states_[active[k]].advance(logits.narrow(0, static_cast<int64_t>(k) * num_beams_, num_beams_)));
    return parents;
  }

  std::vector<GeneratedSequence> result(std::size_t p) override { return states_[p].result(); }

 private:
  int64_t num_beams_;
  std::vector<BeamState> states_;
};

}  // namespace

std::unique_ptr<TokenPicker> make_token_picker(Picking picking, std::vector<std::vector<int64_t>> starts,
                                               const GenerationConfig& config, at::Generator& generator) {
  if (picking == Picking::kBeams) return std::make_unique<BeamPicker>(std::move(starts), config);
  return std::make_unique<GreedyOrSamplingPicker>(std::move(starts), config, generator);
}

}  // namespace hftrain
