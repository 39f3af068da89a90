// One prompt's beam search state (see beam_state.h). The rules follow HF transformers' beam search as of
// v4.36-v4.49 (generation/beam_search.py: BeamSearchScorer.process / finalize, BeamHypotheses.add /
// is_done; generation/utils.py: _beam_search), written here from their description:
//  - each step: log_softmax of the last logits, forbidding processors, plus the beam's running score; the
//    2 * num_beams best (beam, token) pairs over all beams, best first;
//  - a candidate that is eos, among the first num_beams, becomes a finished hypothesis (its tokens without
//    the eos); other candidates fill the next num_beams beams in order;
//  - the length in the length penalty is the generated length only: HF passes
//    generated_len = cur_len - decoder_prompt_len with cur_len = input length + 1 (the eos counts) to
//    BeamHypotheses.add, and input length - prompt length for the beams still running at the end. (Before
//    v4.36, transformers divided by the whole sequence length, prompt included, without the eos.)
//  - is_done: with fewer than num_beams finished hypotheses, never; early_stopping true: done; false: done
//    when the worst kept score >= best running candidate / cur_generated_len ** length_penalty; "never":
//    the same with max_new_tokens as the length when length_penalty > 0 (the best score still reachable);
//  - generation ends when done or at max_length (prompt + max_new_tokens); then, unless done, every
//    running beam is offered as a hypothesis; the best are returned, ties to the later-added one (HF sorts
//    the list stably by score and pops from the end).
#include "generate/beam_state.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace hftrain {

// HF's early_stopping: false, true or "never" (at namespace scope: BeamState::Finished, a member, holds one).
enum class BeamEarlyStopping { kFalse, kTrue, kNever };

// The num_beams best finished hypotheses so far (HF's BeamHypotheses).
struct BeamState::Finished {
  struct Hypothesis {
    double score;
    std::vector<int64_t> tokens;  // prompt + generated, without a final eos
    bool ended_with_eos;
  };

  Finished(int64_t num_beams, double length_penalty, BeamEarlyStopping early_stopping, int64_t max_new_tokens)
      : num_beams_(num_beams), length_penalty_(length_penalty), early_stopping_(early_stopping), max_new_tokens_(max_new_tokens) {}

  void add(const std::vector<int64_t>& tokens, double sum_logprobs, int64_t generated_length, bool ended_with_eos) {
    const double score = sum_logprobs / std::pow(static_cast<double>(generated_length), length_penalty_);
    if (static_cast<int64_t>(list_.size()) < num_beams_ || score > worst_score_) {
      list_.push_back({score, tokens, ended_with_eos});
      if (static_cast<int64_t>(list_.size()) > num_beams_) {
        // Drop the lowest score (the earliest-added among equal ones); the next lowest is the new worst.
        std::vector<std::pair<double, std::size_t>> order;
        for (std::size_t i = 0; i < list_.size(); ++i) order.emplace_back(list_[i].score, i);
        std::sort(order.begin(), order.end());
        list_.erase(list_.begin() + static_cast<std::ptrdiff_t>(order[0].second));
        worst_score_ = order[1].first;
      } else {
        worst_score_ = std::min(score, worst_score_);
      }
    }
  }

  // Whether no running beam can still make the list better. `best_sum_logprobs`: the best candidate of
  // this step; `generated_length`: tokens generated once this step's token is appended.
  bool is_done(double best_sum_logprobs, int64_t generated_length) const {
    if (static_cast<int64_t>(list_.size()) < num_beams_) return false;
    if (early_stopping_ == BeamEarlyStopping::kTrue) return true;
    int64_t length = generated_length;
    if (early_stopping_ == BeamEarlyStopping::kNever && length_penalty_ > 0) length = max_new_tokens_;
    const double highest_attainable = best_sum_logprobs / std::pow(static_cast<double>(length), length_penalty_);
    return worst_score_ >= highest_attainable;
  }

  // The best n, best first (ties: the later-added first).
  std::vector<Hypothesis> best(int64_t n) const {
    std::vector<Hypothesis> sorted = list_;
    std::stable_sort(sorted.begin(), sorted.end(), [](const Hypothesis& a, const Hypothesis& b) { return a.score < b.score; });
    std::vector<Hypothesis> out;
    for (int64_t i = 0; i < n && !sorted.empty(); ++i) {
      out.push_back(sorted.back());
      sorted.pop_back();
    }
    return out;
  }

 private:
  int64_t num_beams_;
  double length_penalty_;
  BeamEarlyStopping early_stopping_;
  int64_t max_new_tokens_;
  std::vector<Hypothesis> list_;
  double worst_score_ = 1e9;
};

BeamState::BeamState(std::vector<int64_t> start, const GenerationConfig& config) : config_(config) {
  if (config.num_beams < 2) throw ConfigError("beam search needs generation.num_beams >= 2 (1 is greedy decoding)");
  if (start.empty()) throw RuntimeFailure("beam search: the prompt is empty (nothing to condition on)");
  prompt_length_ = static_cast<int64_t>(start.size());
  const int64_t budget = new_token_budget(config, prompt_length_);
  max_length_ = prompt_length_ + budget;
  cur_len_ = prompt_length_;
  beams_.assign(static_cast<std::size_t>(config.num_beams), std::move(start));
  // Running scores in float32, as HF keeps them; all beams start from the same prompt, so only the first
  // may contribute at the first step.
  beam_scores_ = torch::zeros({config.num_beams}, torch::kFloat);
  beam_scores_.slice(0, 1).fill_(-1e9);
  const BeamEarlyStopping early_stopping = config.early_stopping == "true"    ? BeamEarlyStopping::kTrue
                                       : config.early_stopping == "never" ? BeamEarlyStopping::kNever
                                                                          : BeamEarlyStopping::kFalse;
  finished_ = std::make_unique<Finished>(config.num_beams, config.length_penalty, early_stopping, budget);
}

BeamState::BeamState(BeamState&&) noexcept = default;
BeamState::~BeamState() = default;

bool BeamState::finished() const { return done_ || cur_len_ >= max_length_; }

std::vector<int64_t> BeamState::advance(const torch::Tensor& logits) {
  const int64_t num_beams = config_.num_beams;
  auto scores = torch::log_softmax(logits.to(torch::kCPU, torch::kFloat), -1).contiguous();  // processed on the host
  mask_forbidden_tokens(scores, beams_, prompt_length_, config_);
  const int64_t vocab = scores.size(1);
  if (vocab < 2) throw RuntimeFailure("beam search needs a vocabulary of at least 2 tokens");
  auto flat = (scores + beam_scores_.unsqueeze(1)).reshape({-1});
  auto top = torch::topk(flat, 2 * num_beams, -1, /*largest=*/true, /*sorted=*/true);
  auto top_scores = std::get<0>(top).contiguous(), top_ids = std::get<1>(top).contiguous();
  const float* score_ptr = top_scores.data_ptr<float>();
  const int64_t* id_ptr = top_ids.data_ptr<int64_t>();
  const bool has_eos = config_.eos_token_id.has_value();
  const int64_t eos = config_.eos_token_id.value_or(-1);

  std::vector<int64_t> parents, tokens;
  std::vector<float> next_scores;
  for (int64_t rank = 0; rank < 2 * num_beams; ++rank) {
    const int64_t beam = id_ptr[rank] / vocab, token = id_ptr[rank] % vocab;
    if (has_eos && token == eos) {
      if (rank >= num_beams) continue;  // an eos outside the first num_beams candidates is not kept
      finished_->add(beams_[static_cast<std::size_t>(beam)], score_ptr[rank], cur_len_ + 1 - prompt_length_, true);
    } else {
      parents.push_back(beam);
      tokens.push_back(token);
      next_scores.push_back(score_ptr[rank]);
    }
    if (static_cast<int64_t>(parents.size()) == num_beams) break;
  }
  // Each beam contributes at most one eos to the 2 * num_beams candidates, so num_beams others remain.
  if (static_cast<int64_t>(parents.size()) < num_beams) throw RuntimeFailure("beam search: fewer candidates than beams");
  done_ = done_ || finished_->is_done(score_ptr[0], cur_len_ + 1 - prompt_length_);

  std::vector<std::vector<int64_t>> next_beams;
  for (std::size_t i = 0; i < parents.size(); ++i) {
    next_beams.push_back(beams_[static_cast<std::size_t>(parents[i])]);
    next_beams.back().push_back(tokens[i]);
  }
  beams_ = std::move(next_beams);
  beam_scores_ = torch::tensor(next_scores, torch::kFloat);
  ++cur_len_;
  return parents;
}

std::vector<GeneratedSequence> BeamState::result() {
  if (!done_) {
    auto s = beam_scores_.contiguous();
    for (int64_t b = 0; b < config_.num_beams; ++b)
      finished_->add(beams_[static_cast<std::size_t>(b)], s.data_ptr<float>()[b], cur_len_ - prompt_length_, false);
    done_ = true;
  }
  std::vector<GeneratedSequence> out;
  for (const auto& h : finished_->best(config_.num_return_sequences)) {
    GeneratedSequence g;
    g.tokens.assign(h.tokens.begin() + prompt_length_, h.tokens.end());
    if (h.ended_with_eos) g.tokens.push_back(config_.eos_token_id.value_or(-1));
    g.score = h.score;
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace hftrain
