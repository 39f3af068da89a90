// Beam search (see beam_search.h): the decode loop with the beam picker.
#include "generate/beam_search.h"

#include "generate/decode.h"

namespace hftrain {

std::vector<GeneratedSequence> beam_search(Model& model, const std::vector<int64_t>& prompt, const GenerationConfig& config) {
  return std::move(beam_search_batch(model, {prompt}, config).front());
}

std::vector<std::vector<GeneratedSequence>> beam_search_batch(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                                                              const GenerationConfig& config) {
  at::Generator unused = make_generator(0);  // beams draw nothing
  return decode_prompts(model, prompts, config, unused, Picking::kBeams);
}

}  // namespace hftrain
