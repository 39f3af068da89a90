// Beam search (see beam_search.h). The rules follow HF transformers' beam search for decoder-only models
// as of v4.36-v4.49 (generation/beam_search.py: BeamSearchScorer.process / finalize, BeamHypotheses.add /
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
#include "generate/beam_search.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace hftrain {
namespace {

using EarlyStopping = GenerationConfig::EarlyStopping;

struct Hypothesis {
  double score;
  std::vector<int64_t> tokens;  // prompt + generated, without a final eos
  bool ended_with_eos;
};

// The num_beams best finished hypotheses so far (HF's BeamHypotheses).
class FinishedHypotheses {
 public:
  FinishedHypotheses(int64_t num_beams, double length_penalty, EarlyStopping early_stopping, int64_t max_new_tokens)
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
    if (early_stopping_ == EarlyStopping::kTrue) return true;
    int64_t length = generated_length;
    if (early_stopping_ == EarlyStopping::kNever && length_penalty_ > 0) length = max_new_tokens_;
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
  EarlyStopping early_stopping_;
  int64_t max_new_tokens_;
  std::vector<Hypothesis> list_;
  double worst_score_ = 1e9;
};

torch::Tensor ids_tensor(const std::vector<std::vector<int64_t>>& rows, std::size_t begin, const torch::Device& device) {
  std::vector<int64_t> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin() + static_cast<std::ptrdiff_t>(begin), r.end());
  return token_ids_on(flat, device).view({static_cast<int64_t>(rows.size()), -1});
}

}  // namespace

void select_cache_rows(KvCache& cache, const torch::Tensor& rows) {
  for (auto* tensors : {&cache.keys, &cache.values, &cache.cross_keys, &cache.cross_values})
    for (auto& t : *tensors)
      if (t.defined()) t = t.index_select(0, rows);
  for (auto* t : {&cache.encoder_hidden, &cache.encoder_mask})
    if (t->defined()) *t = t->index_select(0, rows);
}

std::vector<GeneratedSequence> beam_search(Model& model, const std::vector<int64_t>& prompt, const GenerationConfig& config) {
  validate_generation_config(config);
  if (config.num_beams < 2) throw ConfigError("beam search needs generation.num_beams >= 2 (1 is greedy decoding)");
  if (prompt.empty()) throw RuntimeFailure("beam search: the prompt is empty (nothing to condition on)");
  torch::NoGradGuard no_grad;
  const int64_t num_beams = config.num_beams;
  // An encoder-decoder model reads `prompt` with its encoder (once); its beams are decoder sequences that
  // start with the decoder start token, which plays the prompt's part in HF's lengths and processors.
  const bool encoder_decoder = model.is_encoder_decoder();
  const torch::Device device = model_device(model);
  const torch::Tensor source = token_ids_on(prompt, device).unsqueeze(0);
  const std::vector<int64_t> start =
      encoder_decoder ? std::vector<int64_t>{model.decoder_start_token_id()} : prompt;
  const auto prompt_length = static_cast<int64_t>(start.size());
  const int64_t budget = new_token_budget(config, prompt_length);
  const int64_t max_length = prompt_length + budget;
  const bool has_eos = config.eos_token_id.has_value();
  const int64_t eos = config.eos_token_id.value_or(-1);

  std::vector<std::vector<int64_t>> beams(static_cast<std::size_t>(num_beams), start);
  // Running scores in float32, as HF keeps them; all beams start from the same prompt, so only the first
  // may contribute at the first step.
  auto beam_scores = torch::zeros({num_beams}, torch::kFloat);
  beam_scores.slice(0, 1).fill_(-1e9);
  FinishedHypotheses finished(num_beams, config.length_penalty, config.early_stopping, budget);
  KvCache cache;
  bool done = false;
  int64_t cur_len = prompt_length;
  while (true) {
    // Next-token logits [num_beams, V] of every beam.
    torch::Tensor last;
    const bool window_slides = !encoder_decoder && config.max_context > 0 && cur_len > config.max_context;
    if (window_slides) cache = KvCache{};  // positions move from now on: the cache is of no further use
    if (encoder_decoder) {
      if (cache.length == 0) {  // the encoder and the start token once, then copied to every beam
        auto logits = model.forward_encoder_decoder_cached(source, {}, token_ids_on(start, device).unsqueeze(0), cache);
        select_cache_rows(cache, token_ids_on(std::vector<int64_t>(static_cast<std::size_t>(num_beams), 0), device));
        last = logits[0][logits.size(1) - 1].unsqueeze(0).expand({num_beams, logits.size(2)});
      } else {
        auto logits = model.forward_encoder_decoder_cached(source, {}, ids_tensor(beams, static_cast<std::size_t>(cur_len - 1), device), cache);
        last = logits.select(1, logits.size(1) - 1);
      }
    } else if (model.supports_kv_cache() && !window_slides) {
      if (cache.length == 0) {  // the prompt once, then its cache copied to every beam
        auto logits = model.forward_cached(token_ids_on(prompt, device).unsqueeze(0), cache);
        select_cache_rows(cache, token_ids_on(std::vector<int64_t>(static_cast<std::size_t>(num_beams), 0), device));
        last = logits[0][logits.size(1) - 1].unsqueeze(0).expand({num_beams, logits.size(2)});
      } else {
        auto logits = model.forward_cached(ids_tensor(beams, static_cast<std::size_t>(cur_len - 1), device), cache);
        last = logits.select(1, logits.size(1) - 1);
      }
    } else {  // no cache, or the window slides: rerun every beam's cropped context
      const int64_t begin = window_slides ? cur_len - config.max_context : 0;
      Batch b;
      b.input_ids = ids_tensor(beams, static_cast<std::size_t>(begin), device);
      auto logits = model.forward(b).logits;
      last = logits.select(1, logits.size(1) - 1);
    }
    auto scores = torch::log_softmax(last.to(torch::kCPU, torch::kFloat), -1);  // processed on the host
    mask_forbidden_tokens(scores, beams, prompt_length, config);
    const int64_t vocab = scores.size(1);
    if (vocab < 2) throw RuntimeFailure("beam search needs a vocabulary of at least 2 tokens");
    auto flat = (scores + beam_scores.unsqueeze(1)).reshape({-1});
    auto top = torch::topk(flat, 2 * num_beams, -1, /*largest=*/true, /*sorted=*/true);
    auto top_scores = std::get<0>(top).contiguous(), top_ids = std::get<1>(top).contiguous();
    const float* score_ptr = top_scores.data_ptr<float>();
    const int64_t* id_ptr = top_ids.data_ptr<int64_t>();

    std::vector<int64_t> parents, tokens;
    std::vector<float> next_scores;
    for (int64_t rank = 0; rank < 2 * num_beams; ++rank) {
      const int64_t beam = id_ptr[rank] / vocab, token = id_ptr[rank] % vocab;
      if (has_eos && token == eos) {
        if (rank >= num_beams) continue;  // an eos outside the first num_beams candidates is not kept
        finished.add(beams[static_cast<std::size_t>(beam)], score_ptr[rank], cur_len + 1 - prompt_length, true);
      } else {
        parents.push_back(beam);
        tokens.push_back(token);
        next_scores.push_back(score_ptr[rank]);
      }
      if (static_cast<int64_t>(parents.size()) == num_beams) break;
    }
    // Each beam contributes at most one eos to the 2 * num_beams candidates, so num_beams others remain.
    if (static_cast<int64_t>(parents.size()) < num_beams) throw RuntimeFailure("beam search: fewer candidates than beams");
    done = done || finished.is_done(score_ptr[0], cur_len + 1 - prompt_length);

    std::vector<std::vector<int64_t>> next_beams;
    for (std::size_t i = 0; i < parents.size(); ++i) {
      next_beams.push_back(beams[static_cast<std::size_t>(parents[i])]);
      next_beams.back().push_back(tokens[i]);
    }
    beams = std::move(next_beams);
    beam_scores = torch::tensor(next_scores, torch::kFloat);
    if (cache.length > 0) select_cache_rows(cache, token_ids_on(parents, device));
    ++cur_len;
    if (done || cur_len >= max_length) break;
  }
  if (!done) {
    auto s = beam_scores.contiguous();
    for (int64_t b = 0; b < num_beams; ++b)
      finished.add(beams[static_cast<std::size_t>(b)], s.data_ptr<float>()[b], cur_len - prompt_length, false);
  }
  std::vector<GeneratedSequence> out;
  for (const auto& h : finished.best(config.num_return_sequences)) {
    GeneratedSequence g;
    g.tokens.assign(h.tokens.begin() + prompt_length, h.tokens.end());
    if (h.ended_with_eos) g.tokens.push_back(eos);
    g.score = h.score;
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace hftrain
