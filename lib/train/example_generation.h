// One example's generation, shared by evaluation (predict_with_generate) and prediction: what is
// generated from an example, its decoded text and the length HF reports as gen_len.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "distributed/comm.h"
#include "generate/generate.h"
#include "train/model_and_data.h"

namespace hftrain {

struct ExampleGeneration {
  std::vector<int64_t> prompt;               // the encoder's input (seq2seq) or the prompt
  std::vector<GeneratedSequence> sequences;  // best first
  std::vector<int64_t> reference;            // the scored labels: the target, or the prompt's continuation
};

// The prompt and reference of `ex`, nothing generated yet.
ExampleGeneration prepare_generation(const ModelAndData& p, const Example& ex);

// Generates from each of `examples` (one evaluation batch, generated together as HF generate() runs a
// batch: generate/batch_generate.h): a seq2seq example's whole input, a causal LM example's first
// prompt_length tokens.
std::vector<ExampleGeneration> generate_for(ModelAndData& p, const std::vector<Example>& examples,
                                            const GenerationConfig& config, at::Generator& generator);

// Decoded text without special tokens (HF's batch_decode with skip_special_tokens=True), the eos that
// generation stops at included.
std::string generated_text(const ModelAndData& p, const std::vector<int64_t>& ids, const GenerationConfig& config);

// The length run_summarization / run_translation report as gen_len: tokens other than padding in what HF
// generate() returns (the decoder start token or the prompt, then the generated tokens).
int64_t generated_length(const ModelAndData& p, const ExampleGeneration& g, int64_t pad_id);

// A split's generations in loader order, as evaluation scores them (predict hands its own to the test
// metrics instead of generating twice).
struct SplitGenerations {
  std::vector<std::string> predictions, references;
  std::vector<int64_t> lengths;  // generated_length of each example
};

// Evaluation's generation split over ranks (several workers, parameters not sharded): each rank generates
// its share of the batches, then every rank receives every example's generated ids and gen_len.
struct GeneratedIds {
  std::vector<int64_t> ids;
  int64_t length = 0;  // generated_length
};
// `mine`: this rank's examples by their index in loader order; `total` examples in all. Returns all of
// them in order; RuntimeFailure naming the example when no rank generated it.
std::vector<GeneratedIds> gather_generated(Comm& comm, int64_t total, const std::map<int64_t, GeneratedIds>& mine);

}  // namespace hftrain
