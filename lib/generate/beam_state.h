// One prompt's beam search state with HF generate()'s rules (the decode loop, decode.h, feeds the model
// and picks through it): the running beams and their float32 scores, the finished hypotheses (HF's
// BeamHypotheses) and the step that turns the beams' next-token log-probabilities into the next beams
// (HF's BeamSearchScorer.process). The same state serves one prompt alone and every prompt of a batch.
#pragma once

#include <memory>
#include <vector>

#include "generate/generate.h"

namespace hftrain {

class BeamState {
 public:
  // `start`: the prompt (decoder-only) or the decoder start token (encoder-decoder), which plays the
  // prompt's part in lengths and processors.
  BeamState(std::vector<int64_t> start, const GenerationConfig& config);
  BeamState(BeamState&&) noexcept;
  ~BeamState();

  // One step from the beams' next-token logits [num_beams, V] (any device and dtype): log-softmax, HF's
  // forbidding processors, the 2 * num_beams best (beam, token) candidates, eos candidates among the first
  // num_beams finished, the others the next beams. Returns each next beam's parent beam (what the KV
  // cache's rows must follow).
  std::vector<int64_t> advance(const torch::Tensor& logits);
  // Done (no running beam can improve the kept hypotheses) or at the length limit.
  bool finished() const;
  // The running beams: start + generated tokens.
  const std::vector<std::vector<int64_t>>& beams() const { return beams_; }
  int64_t length() const { return cur_len_; }  // tokens in every beam
  // The best config.num_return_sequences hypotheses (running beams offered first unless done), best first.
  std::vector<GeneratedSequence> result();

 private:
  struct Finished;
  const GenerationConfig& config_;
  std::vector<std::vector<int64_t>> beams_;
  torch::Tensor beam_scores_;
  std::unique_ptr<Finished> finished_;
  int64_t prompt_length_, max_length_, cur_len_;
  bool done_ = false;
};

}  // namespace hftrain
