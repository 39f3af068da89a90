// Beam search drivers (see beam_search.h): they feed the model and keep its KV cache's rows following the
// beams; the rules of each step are BeamState's (beam_state.cpp).
#include "generate/beam_search.h"

#include "generate/beam_state.h"
#include "util/error.h"

namespace hftrain {
namespace {

torch::Tensor ids_tensor(const std::vector<std::vector<int64_t>>& rows, std::size_t begin, const torch::Device& device) {
  std::vector<int64_t> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin() + static_cast<std::ptrdiff_t>(begin), r.end());
  return token_ids_on(flat, device).view({static_cast<int64_t>(rows.size()), -1});
}

}  // namespace

std::vector<GeneratedSequence> beam_search(Model& model, const std::vector<int64_t>& prompt, const GenerationConfig& config) {
  validate_generation_config(config);
  torch::NoGradGuard no_grad;
  const int64_t num_beams = config.num_beams;
  // An encoder-decoder model reads `prompt` with its encoder (once); its beams are decoder sequences that
  // start with the decoder start token.
  const bool encoder_decoder = model.is_encoder_decoder();
  const torch::Device device = model_device(model);
  const torch::Tensor source = token_ids_on(prompt, device).unsqueeze(0);
  BeamState state(encoder_decoder ? std::vector<int64_t>{model.decoder_start_token_id()} : prompt, config);
  const torch::Tensor to_every_beam = token_ids_on(std::vector<int64_t>(static_cast<std::size_t>(num_beams), 0), device);
  KvCache cache;
  while (!state.finished()) {
    // Next-token logits [num_beams, V] of every beam.
    const int64_t cur_len = state.length();
    torch::Tensor last;
    const bool window_slides = !encoder_decoder && config.max_context > 0 && cur_len > config.max_context;
    if (window_slides) cache = KvCache{};  // positions move from now on: the cache is of no further use
    if (encoder_decoder || (model.supports_kv_cache() && !window_slides)) {
      torch::Tensor logits;
      if (cache.length == 0) {  // the prompt (or the encoder and the start token) once, then copied to every beam
        const auto& first = state.beams().front();
        logits = encoder_decoder ? model.forward_encoder_decoder_cached(source, {}, token_ids_on(first, device).unsqueeze(0), cache)
                                 : model.forward_cached(token_ids_on(first, device).unsqueeze(0), cache);
        cache.keep_rows(to_every_beam);
        last = logits[0][logits.size(1) - 1].unsqueeze(0).expand({num_beams, logits.size(2)});
      } else {
        const torch::Tensor fresh = ids_tensor(state.beams(), static_cast<std::size_t>(cur_len - 1), device);
        logits = encoder_decoder ? model.forward_encoder_decoder_cached(source, {}, fresh, cache)
                                 : model.forward_cached(fresh, cache);
        last = logits.select(1, logits.size(1) - 1);
      }
    } else {  // no cache, or the window slides: rerun every beam's cropped context
      Batch b;
      b.input_ids = ids_tensor(state.beams(), static_cast<std::size_t>(window_slides ? cur_len - config.max_context : 0), device);
      auto logits = model.forward(b).logits;
      last = logits.select(1, logits.size(1) - 1);
    }
    const std::vector<int64_t> parents = state.advance(last);
    if (cache.length > 0) cache.keep_rows(token_ids_on(parents, device));
  }
  return state.result();
}

std::vector<std::vector<GeneratedSequence>> beam_search_batch(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                                                              const GenerationConfig& config) {
  validate_generation_config(config);
  const bool encoder_decoder = model.is_encoder_decoder();
  std::vector<std::vector<GeneratedSequence>> out(prompts.size());
  std::vector<std::size_t> together;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const int64_t start_length = encoder_decoder ? 1 : static_cast<int64_t>(prompts[i].size());
    const bool slides = !encoder_decoder && config.max_context > 0 &&
                        start_length + new_token_budget(config, start_length) > config.max_context;
    if (prompts.size() == 1 || prompts[i].empty() || (!encoder_decoder && (!model.supports_kv_cache() || slides)))
      out[i] = beam_search(model, prompts[i], config);
    else
      together.push_back(i);
  }
  if (together.empty()) return out;
  torch::NoGradGuard no_grad;
  const int64_t num_beams = config.num_beams;
  const torch::Device device = model_device(model);
  std::vector<BeamState> states;
  std::vector<std::vector<int64_t>> rows;
  for (std::size_t i : together) {
    states.emplace_back(encoder_decoder ? std::vector<int64_t>{model.decoder_start_token_id()} : prompts[i], config);
    rows.push_back(prompts[i]);
  }
  // The first forward: one row per prompt (left-padded prompts, or the right-padded sources and the start
  // token), then each row copied to its num_beams beams.
  KvCache cache;
  torch::Tensor source, source_mask, logits;
  const auto batch = static_cast<int64_t>(together.size());
  if (encoder_decoder) {
    std::tie(source, source_mask) = right_padded_sources(rows, device);
    logits = model.forward_encoder_decoder_cached(
        source, source_mask,
        torch::full({batch, 1}, model.decoder_start_token_id(), torch::TensorOptions().dtype(torch::kLong).device(device)), cache);
  } else {
    logits = model.forward_cached(left_padded_prompts(rows, cache, device), cache);
  }
  const torch::Tensor to_beams = torch::arange(batch, torch::TensorOptions().dtype(torch::kLong).device(device))
                                     .repeat_interleave(num_beams);
  cache.keep_rows(to_beams);
  torch::Tensor last = logits.select(1, logits.size(1) - 1).index_select(0, to_beams);
  std::vector<std::size_t> active(states.size());
  for (std::size_t k = 0; k < active.size(); ++k) active[k] = k;
  while (true) {
    std::vector<std::size_t> still;
    std::vector<int64_t> keep, fed, positions;
    for (std::size_t k = 0; k < active.size(); ++k) {
      BeamState& s = states[active[k]];
      const auto base = static_cast<int64_t>(k) * num_beams;
      const std::vector<int64_t> parents = s.advance(last.narrow(0, base, num_beams));
      if (s.finished()) continue;  // its beams leave the batch
      still.push_back(active[k]);
      for (int64_t p : parents) keep.push_back(base + p);
      for (const auto& beam : s.beams()) {
        fed.push_back(beam.back());
        positions.push_back(s.length() - 1);
      }
    }
    if (still.empty()) break;
    active = still;
    cache.keep_rows(token_ids_on(keep, device));
    const auto n = static_cast<int64_t>(fed.size());
    const torch::Tensor input = token_ids_on(fed, device).view({n, 1});
    if (encoder_decoder) {
      logits = model.forward_encoder_decoder_cached(source, source_mask, input, cache);
    } else {
      extend_left_padded(cache, positions, device);
      logits = model.forward_cached(input, cache);
    }
    last = logits.select(1, logits.size(1) - 1);
  }
  for (std::size_t k = 0; k < together.size(); ++k) out[together[k]] = states[k].result();
  return out;
}

}  // namespace hftrain
