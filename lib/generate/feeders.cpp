// The feeders of the decode loop (see decode.h): how the model is run for the next-token logits.
#include <algorithm>
#include <numeric>

#include "generate/decode.h"
#include "util/error.h"

namespace hftrain {
namespace {

torch::Device model_device(const Model& model) {
  for (const auto& p : model.parameters()) return p.device();
  return torch::kCPU;
}

// Token ids as an int64 tensor on `device` (generation feeds the model there and picks on the host).
torch::Tensor token_ids_on(const std::vector<int64_t>& ids, const torch::Device& device) {
  auto t = torch::tensor(ids, torch::kLong);
  return device.is_cpu() ? t : t.to(device);
}

// [rows, longest] ids padded with 0 on the left or right, and the mask (1 = token).
std::pair<torch::Tensor, torch::Tensor> padded(const std::vector<std::vector<int64_t>>& rows, bool left,
                                               const torch::Device& device) {
  std::size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r.size());
  std::vector<int64_t> ids, mask;
  for (const auto& r : rows) {
    const std::size_t pad = width - r.size();
    const auto at = left ? 0 : r.size();
    std::vector<int64_t> row_ids(r), row_mask(r.size(), 1);
    row_ids.insert(row_ids.begin() + static_cast<std::ptrdiff_t>(at), pad, 0);
    row_mask.insert(row_mask.begin() + static_cast<std::ptrdiff_t>(at), pad, 0);
    ids.insert(ids.end(), row_ids.begin(), row_ids.end());
    mask.insert(mask.end(), row_mask.begin(), row_mask.end());
  }
  const auto n = static_cast<int64_t>(rows.size()), w = static_cast<int64_t>(width);
  return {token_ids_on(ids, device).view({n, w}), token_ids_on(mask, device).view({n, w})};
}

torch::Tensor last_position(const torch::Tensor& logits) { return logits.select(1, logits.size(1) - 1); }

// Models without a KV cache, and a decoder-only prompt past max_context: every row's last max_context
// tokens (all of them when max_context is 0) rerun each step; the positions move as the window slides.
class WindowFeeder : public Feeder {
 public:
  WindowFeeder(Model& model, int64_t max_context) : model_(model), max_context_(max_context), device_(model_device(model)) {}

  torch::Tensor next_logits(const DecodeRows& rows) override {
    const auto n = static_cast<int64_t>(rows.front()->size());
    const int64_t begin = max_context_ > 0 && n > max_context_ ? n - max_context_ : 0;
    std::vector<int64_t> flat;
    for (const auto* row : rows) flat.insert(flat.end(), row->begin() + begin, row->end());
    Batch b;
    b.input_ids = token_ids_on(flat, device_).view({static_cast<int64_t>(rows.size()), n - begin});
    return last_position(model_.forward(b).logits);
  }
  void keep_rows(const std::vector<int64_t>&) override {}  // nothing is kept between steps

 private:
  Model& model_;
  int64_t max_context_;
  torch::Device device_;
};

// The two cached feeders: the first call runs one row per prompt (padded when there are several) and
// copies its cache to the prompt's rows; later calls feed each row's last token.
class CachedFeeder : public Feeder {
 public:
  CachedFeeder(Model& model, const std::vector<std::vector<int64_t>>& prompts, int64_t rows_per_prompt)
      : model_(model), device_(model_device(model)), prompts_(prompts), rows_per_prompt_(rows_per_prompt) {}

  torch::Tensor next_logits(const DecodeRows& rows) override {
    if (!started_) {
      started_ = true;
      rows_ = static_cast<int64_t>(prompts_.size()) * rows_per_prompt_;
      torch::Tensor last = last_position(first_forward());
      if (rows_per_prompt_ == 1) return last;
      const auto options = torch::TensorOptions().dtype(torch::kLong).device(device_);
      const torch::Tensor to_rows = torch::arange(static_cast<int64_t>(prompts_.size()), options).repeat_interleave(rows_per_prompt_);
      cache_.keep_rows(to_rows);
      return last.index_select(0, to_rows);
    }
    std::vector<int64_t> tokens, positions;  // each row's last token and its index in the unpadded row
    for (const auto* row : rows) {
      tokens.push_back(row->back());
      positions.push_back(static_cast<int64_t>(row->size()) - 1);
    }
    return last_position(step_forward(token_ids_on(tokens, device_).view({static_cast<int64_t>(rows.size()), 1}), positions));
  }

  void keep_rows(const std::vector<int64_t>& rows) override {
    std::vector<int64_t> same(static_cast<std::size_t>(rows_));
    std::iota(same.begin(), same.end(), int64_t{0});
    if (rows != same) cache_.keep_rows(token_ids_on(rows, device_));
    rows_ = static_cast<int64_t>(rows.size());
  }

 protected:
  bool several() const { return prompts_.size() > 1; }  // padded
  virtual torch::Tensor first_forward() = 0;  // logits [prompts, T, V]
  virtual torch::Tensor step_forward(const torch::Tensor& input, const std::vector<int64_t>& positions) = 0;

  Model& model_;
  torch::Device device_;
  const std::vector<std::vector<int64_t>> prompts_;
  const int64_t rows_per_prompt_;
  KvCache cache_;
  int64_t rows_ = 0;  // rows in the cache
  bool started_ = false;
};

// Decoder-only models with a KV cache. Several prompts are left-padded into one block with
// KvCache::key_mask and positions counted from each row's first token (HF); one prompt is fed as it is.
class CachedDecoderFeeder : public CachedFeeder {
 public:
  CachedDecoderFeeder(Model& model, const std::vector<std::vector<int64_t>>& prompts, int64_t rows_per_prompt, int64_t max_context)
      : CachedFeeder(model, prompts, rows_per_prompt), max_context_(max_context), window_(model, max_context) {}

  torch::Tensor next_logits(const DecodeRows& rows) override {
    // Past max_context every position moves: the cache is of no further use and the window reruns (only
    // a prompt decoded alone gets here, decode_prompts sees to it).
    if (!sliding_ && max_context_ > 0 && static_cast<int64_t>(rows.front()->size()) > max_context_) {
      sliding_ = true;
      cache_ = KvCache{};
    }
    return sliding_ ? window_.next_logits(rows) : CachedFeeder::next_logits(rows);
  }
  void keep_rows(const std::vector<int64_t>& rows) override {
    if (!sliding_) CachedFeeder::keep_rows(rows);
  }

 private:
  torch::Tensor first_forward() override {
    if (!several()) return model_.forward_cached(token_ids_on(prompts_.front(), device_).unsqueeze(0), cache_);
    torch::Tensor input;
    std::tie(input, cache_.key_mask) = padded(prompts_, /*left=*/true, device_);
    cache_.positions = (cache_.key_mask.cumsum(1) - 1).clamp_min(0);
    return model_.forward_cached(input, cache_);
  }
  torch::Tensor step_forward(const torch::Tensor& input, const std::vector<int64_t>& positions) override {
    if (several()) {  // one more real token per row
      const auto n = static_cast<int64_t>(positions.size());
      cache_.key_mask = torch::cat({cache_.key_mask, torch::ones({n, 1}, cache_.key_mask.options())}, 1);
      cache_.positions = token_ids_on(positions, device_).view({n, 1});
    }
    return model_.forward_cached(input, cache_);
  }

  int64_t max_context_;
  WindowFeeder window_;
  bool sliding_ = false;
};

// Encoder-decoder models: the sources are encoded once (several right-padded, their mask on
// cross-attention) and every row is decoded from the decoder start token.
class EncoderDecoderFeeder : public CachedFeeder {
 public:
  EncoderDecoderFeeder(Model& model, const std::vector<std::vector<int64_t>>& prompts, int64_t rows_per_prompt)
      : CachedFeeder(model, prompts, rows_per_prompt) {
    if (several())
      std::tie(source_, source_mask_) = padded(prompts, /*left=*/false, device_);
    else
      source_ = token_ids_on(prompts.front(), device_).unsqueeze(0);
  }

 private:
  torch::Tensor first_forward() override {
    const torch::Tensor start = torch::full({static_cast<int64_t>(prompts_.size()), 1}, model_.decoder_start_token_id(),
                                            torch::TensorOptions().dtype(torch::kLong).device(device_));
    return model_.forward_encoder_decoder_cached(source_, source_mask_, start, cache_);
  }
  torch::Tensor step_forward(const torch::Tensor& input, const std::vector<int64_t>&) override {
    return model_.forward_encoder_decoder_cached(source_, source_mask_, input, cache_);
  }

  torch::Tensor source_, source_mask_;
};

}  // namespace

std::unique_ptr<Feeder> make_feeder(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                                    const GenerationConfig& config, int64_t rows_per_prompt) {
  if (model.is_encoder_decoder()) return std::make_unique<EncoderDecoderFeeder>(model, prompts, rows_per_prompt);
  if (model.supports_kv_cache())
    return std::make_unique<CachedDecoderFeeder>(model, prompts, rows_per_prompt, config.max_context);
  if (prompts.size() > 1) throw RuntimeFailure("generate: a model without a KV cache decodes one prompt at a time");
  return std::make_unique<WindowFeeder>(model, config.max_context);
}

}  // namespace hftrain
