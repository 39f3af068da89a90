// TRL's packing of SFT examples into rows of at most max_length tokens (packing: true):
// `bfd` (best-fit decreasing) puts whole examples, each truncated to max_length first, longest first into the
// open row with the least room that still fits it (ties: the earliest row), else a new row; each example
// keeps its own attention span (Example::segment_lengths, collated through the padding-free path with
// position ids restarting). `wrapped` concatenates every example and cuts the stream into rows of max_length
// (the last row shorter), one span per row. Free of LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace hftrain {

// "bfd" or "wrapped"; ConfigError (naming data.max_length) for max_length < 1.
std::vector<Example> pack_examples(const std::vector<Example>& examples, const std::string& strategy, int64_t max_length);

}  // namespace hftrain
