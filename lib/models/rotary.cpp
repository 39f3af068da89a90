// The rotary frequencies of each rope_type (see rotary.h), written from the published formulas as
// transformers states them: the same float32 steps, so that HF's and hftrain's tables agree.
#include "models/rotary.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace hftrain {
namespace {

const double kPi = 3.14159265358979323846;

// base^(2i / dim) for i < dim / 2, float32 as HF computes it
torch::Tensor frequency_powers(double base, int64_t dim, const torch::Device& device) {
  auto exponents = torch::arange(0, dim, 2, torch::TensorOptions().dtype(torch::kLong).device(device)).to(torch::kFloat) /
                   static_cast<double>(dim);
  return torch::pow(base, exponents);
}

torch::Tensor default_inv_freq(double base, int64_t dim, const torch::Device& device) {
  return 1.0 / frequency_powers(base, dim, device);
}

// Llama 3.1: wavelengths longer than original / low_freq_factor are divided by factor, shorter than
// original / high_freq_factor kept, and those between interpolated smoothly.
torch::Tensor llama3_inv_freq(const RopeSpec& s, const torch::Device& device) {
  const RopeParameters& p = s.scaling;
  const double original = static_cast<double>(*p.original_max_position_embeddings);
  auto inv = default_inv_freq(s.theta, s.dim, device);
  auto wavelen = 2 * kPi / inv;
  const double low_wavelen = original / p.low_freq_factor, high_wavelen = original / p.high_freq_factor;
  auto scaled = torch::where(wavelen > low_wavelen, inv / p.factor, inv);
  auto smooth = (original / wavelen - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
  auto smoothed = (1 - smooth) * scaled / p.factor + smooth * scaled;
  auto medium = wavelen.ge(high_wavelen).logical_and(wavelen.le(low_wavelen));
  return torch::where(medium, smoothed, scaled);
}

double yarn_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

// YaRN: interpolated (divided by factor) below the correction range of dimensions, extrapolated (kept) above
// it, a linear ramp between; attention scaled by mscale.
RotaryFrequencies yarn_frequencies(const RopeSpec& s, const torch::Device& device) {
  const RopeParameters& p = s.scaling;
  // transformers 4.x: with original_max_position_embeddings the factor is max_position_embeddings / it
  const double original = static_cast<double>(p.original_max_position_embeddings.value_or(s.max_position_embeddings));
  const double factor = p.original_max_position_embeddings ? static_cast<double>(s.max_position_embeddings) / original : p.factor;
  double attention = 0;
  if (p.attention_factor) attention = *p.attention_factor;
  else if (p.mscale.value_or(0) != 0 && p.mscale_all_dim.value_or(0) != 0)
    attention = yarn_mscale(factor, *p.mscale) / yarn_mscale(factor, *p.mscale_all_dim);
  else attention = yarn_mscale(factor, 1.0);
  const double dim = static_cast<double>(s.dim);
  auto correction_dim = [&](double rotations) { return dim * std::log(original / (rotations * 2 * kPi)) / (2 * std::log(s.theta)); };
  double low = correction_dim(p.beta_fast), high = correction_dim(p.beta_slow);
  if (p.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;  // no zero-width ramp
  auto ramp = ((torch::arange(s.dim / 2, torch::TensorOptions().dtype(torch::kFloat).device(device)) - low) / (high - low)).clamp(0, 1);
  auto extrapolation = 1 - ramp;
  auto powers = frequency_powers(s.theta, s.dim, device);
  auto inv = (1.0 / (factor * powers)) * (1 - extrapolation) + (1.0 / powers) * extrapolation;
  return {inv, attention};
}

// LongRoPE: per-frequency factors, the long ones once a sequence passes the original length.
RotaryFrequencies longrope_frequencies(const RopeSpec& s, int64_t seq_len, const torch::Device& device) {
  const RopeParameters& p = s.scaling;
  const double original = static_cast<double>(p.original_max_position_embeddings.value_or(s.max_position_embeddings));
  const double factor = p.original_max_position_embeddings ? static_cast<double>(s.max_position_embeddings) / original
                                                           : (p.factor_given ? p.factor : 1.0);
  const double attention =
      p.attention_factor ? *p.attention_factor : factor <= 1 ? 1.0 : std::sqrt(1 + std::log(factor) / std::log(original));
  const auto& factors = static_cast<double>(seq_len) > original ? p.long_factor : p.short_factor;
  auto ext = torch::tensor(factors, torch::TensorOptions().dtype(torch::kDouble)).to(torch::kFloat).to(device);
  return {1.0 / (ext * frequency_powers(s.theta, s.dim, device)), attention};
}

}  // namespace

RopeSpec make_rope_spec(double theta, const RopeScaling& scaling, int64_t dim, int64_t max_position_embeddings,
                        const std::string& prefix) {
  RopeSpec s;
  s.theta = theta;
  s.dim = dim;
  s.max_position_embeddings = max_position_embeddings;
  if (std::string problem = read_rope_parameters(scaling.value, s.scaling); !problem.empty())
    throw ConfigError(prefix + problem);  // "model." + "rope_scaling.factor: ..."
  const auto half = static_cast<std::size_t>(dim / 2);
  for (const auto* list : {&s.scaling.short_factor, &s.scaling.long_factor})
    if (s.scaling.type == "longrope" && list->size() != half)
      throw ConfigError(prefix + "rope_scaling." + (list == &s.scaling.short_factor ? "short_factor" : "long_factor") + ": has " +
                        std::to_string(list->size()) + " factors, the head size " + std::to_string(dim) + " needs " +
                        std::to_string(half));
  return s;
}

RotaryFrequencies rotary_frequencies(const RopeSpec& s, int64_t seq_len, const torch::Device& device) {
  const RopeParameters& p = s.scaling;
  if (p.type == "linear") return {default_inv_freq(s.theta, s.dim, device) / p.factor, 1.0};
  if (p.type == "dynamic") {
    const double original = static_cast<double>(s.max_position_embeddings);
    const double length = std::max(static_cast<double>(seq_len), original);
    const double base = s.theta * std::pow(p.factor * length / original - (p.factor - 1),
                                           static_cast<double>(s.dim) / static_cast<double>(s.dim - 2));
    return {default_inv_freq(base, s.dim, device), 1.0};
  }
  if (p.type == "llama3") return {llama3_inv_freq(s, device), 1.0};
  if (p.type == "yarn") return yarn_frequencies(s, device);
  if (p.type == "longrope") return longrope_frequencies(s, seq_len, device);
  return {default_inv_freq(s.theta, s.dim, device), 1.0};
}

std::pair<torch::Tensor, torch::Tensor> rotary_tables(const RopeSpec& spec, const torch::Tensor& positions,
                                                      torch::ScalarType dtype, int64_t extent) {
  const bool by_length = spec.scaling.type == "dynamic" || spec.scaling.type == "longrope";
  const int64_t seq_len =
      !by_length ? 0 : extent > 0 ? extent : positions.numel() > 0 ? positions.max().item<int64_t>() + 1 : 0;
  const RotaryFrequencies f = rotary_frequencies(spec, seq_len, positions.device());
  // positions [b, T] -> [b, T, dim / 2] -> tables [b, 1, T, dim]
  auto freqs = positions.to(torch::kFloat).unsqueeze(-1) * f.inv_freq;
  auto emb = torch::cat({freqs, freqs}, -1).unsqueeze(1);
  auto cos = emb.cos(), sin = emb.sin();
  if (f.attention_factor != 1.0) {
    cos = cos * f.attention_factor;
    sin = sin * f.attention_factor;
  }
  return {cos.to(dtype), sin.to(dtype)};
}

}  // namespace hftrain
