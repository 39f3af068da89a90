// One example's generation (see example_generation.h).
#include "train/example_generation.h"

#include <algorithm>

#include "data/dataset.h"
#include "generate/batch_generate.h"
#include "util/error.h"

namespace hftrain {

ExampleGeneration prepare_generation(const ModelAndData& p, const Example& ex) {
  ExampleGeneration g;
  const bool seq2seq = p.data->task() == TaskKind::kSeq2Seq;
  g.prompt.assign(ex.input_ids.begin(), ex.input_ids.begin() + (seq2seq ? static_cast<int64_t>(ex.input_ids.size()) : ex.prompt_length));
  // A causal LM's labels continue the prompt; a seq2seq target stands alone.
  for (std::size_t t = seq2seq ? 0 : static_cast<std::size_t>(ex.prompt_length); t < ex.labels.size(); ++t)
    if (ex.labels[t] != -100) g.reference.push_back(ex.labels[t]);
  return g;
}

std::vector<ExampleGeneration> generate_for(ModelAndData& p, const std::vector<Example>& examples,
                                            const GenerationConfig& config, at::Generator& generator) {
  std::vector<ExampleGeneration> out;
  std::vector<std::vector<int64_t>> prompts;
  for (const Example& ex : examples) {
    out.push_back(prepare_generation(p, ex));
    prompts.push_back(out.back().prompt);
  }
  std::vector<std::vector<GeneratedSequence>> sequences = generate_sequences_batch(*p.model, prompts, config, generator);
  for (std::size_t i = 0; i < out.size(); ++i) out[i].sequences = std::move(sequences[i]);
  return out;
}

std::string generated_text(const ModelAndData& p, const std::vector<int64_t>& ids, const GenerationConfig& config) {
  const Tokenizer* tok = p.data->tokenizer();
  if (!tok) return std::string();
  std::vector<int64_t> kept;
  for (int64_t id : ids)
    if (id != config.eos_token_id) kept.push_back(id);
  return tok->decode_without_special(kept);
}

int64_t generated_length(const ModelAndData& p, const ExampleGeneration& g, int64_t pad_id) {
  std::vector<int64_t> returned = p.model->is_encoder_decoder() ? std::vector<int64_t>{p.model->decoder_start_token_id()} : g.prompt;
  returned.insert(returned.end(), g.sequences.front().tokens.begin(), g.sequences.front().tokens.end());
  return static_cast<int64_t>(std::count_if(returned.begin(), returned.end(), [&](int64_t t) { return t != pad_id; }));
}

std::vector<GeneratedIds> gather_generated(Comm& comm, int64_t total, const std::map<int64_t, GeneratedIds>& mine) {
  std::vector<int64_t> record;  // per example: index, gen_len, number of ids, ids
  for (const auto& [index, g] : mine) {
    record.insert(record.end(), {index, g.length, static_cast<int64_t>(g.ids.size())});
    record.insert(record.end(), g.ids.begin(), g.ids.end());
  }
  const auto sizes = comm.all_gather_ints({static_cast<int64_t>(record.size())}, "evaluation generation sizes");
  int64_t longest = 0;
  for (const auto& s : sizes) longest = std::max(longest, s.at(0));
  record.resize(static_cast<std::size_t>(longest), -1);
  const auto records = comm.all_gather_ints(record, "evaluation generations");
  std::vector<GeneratedIds> out(static_cast<std::size_t>(total));
  std::vector<bool> seen(out.size(), false);
  for (std::size_t r = 0; r < records.size(); ++r) {
    const auto& rec = records[r];
    for (int64_t at = 0; at < sizes[r].at(0);) {
      const int64_t index = rec.at(static_cast<std::size_t>(at)), count = rec.at(static_cast<std::size_t>(at + 2));
      if (index < 0 || index >= total) throw RuntimeFailure("evaluation: rank " + std::to_string(r) + " sent example " +
                                                            std::to_string(index) + " of " + std::to_string(total));
      GeneratedIds& g = out[static_cast<std::size_t>(index)];
      g.length = rec.at(static_cast<std::size_t>(at + 1));
      g.ids.assign(rec.begin() + at + 3, rec.begin() + at + 3 + count);
      seen[static_cast<std::size_t>(index)] = true;
      at += 3 + count;
    }
  }
  for (std::size_t k = 0; k < seen.size(); ++k)
    if (!seen[k]) throw RuntimeFailure("evaluation: no rank generated for example " + std::to_string(k));
  return out;
}

}  // namespace hftrain
