// Batched generation (see batch_generate.h): the decode loop over several prompts.
#include "generate/batch_generate.h"

#include "generate/decode.h"

namespace hftrain {

std::vector<std::vector<int64_t>> generate_batch(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                                                 const GenerationConfig& config, at::Generator& generator) {
  std::vector<std::vector<int64_t>> out;
  for (auto& sequences : decode_prompts(model, prompts, config, generator, Picking::kGreedyOrSampling))
    out.push_back(std::move(sequences.front().tokens));
  return out;
}

std::vector<std::vector<GeneratedSequence>> generate_sequences_batch(Model& model,
                                                                     const std::vector<std::vector<int64_t>>& prompts,
                                                                     const GenerationConfig& config,
                                                                     at::Generator& generator) {
  return decode_prompts(model, prompts, config, generator, picking_for(config));
}

}  // namespace hftrain
