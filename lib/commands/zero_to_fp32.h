// `hftrain zero-to-fp32 CHECKPOINT_DIR [OUTPUT]`: rebuilds the full fp32 weights from the ZeRO shards
// of a checkpoint (any stage, any world size) into OUTPUT/model.safetensors (or
// model-0000x-of-0000y.safetensors + model.safetensors.index.json above --max-shard-size), plus
// config.json. It needs no run spec. It streams: every output tensor is copied byte range by byte range
// from the shard files to the output file (copy_file_range, or a small bounce buffer), so memory stays
// flat whatever the model size; time and peak memory are printed. A missing shard, a truncated file or
// shards whose metadata disagree raise RuntimeFailure naming the file.
#pragma once

#include <cstdint>
#include <string>

namespace hftrain {

struct ZeroToFp32Request {
  std::string checkpoint_dir;  // checkpoint-N/ (with `latest`) or its global_stepN/ folder
  std::string output;          // "" = <parent of checkpoint-N>/fp32-<checkpoint name>
  std::string max_shard_size = "5GB";
};

int run_zero_to_fp32(const ZeroToFp32Request& request);

// "5GB" -> 5e9, "500MiB" -> 500 * 2^20, "1234" -> 1234 bytes (HF convert_file_size_to_int units).
uint64_t parse_size(const std::string& text, const std::string& option = "--max-shard-size");

}  // namespace hftrain
