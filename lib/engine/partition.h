// Partition map of the data-parallel / ZeRO engine: how the trainable parameters of each optimizer
// parameter group are laid out in one flat buffer and split across the ranks. Same rules as
// DeepSpeed ZeRO stage 1/2 (stage_1_and_2.py): per group, the parameters are concatenated in group order
// with no gaps, the total is padded with zeros up to a multiple of alignment * world_size (alignment 2,
// DeepSpeed's nccl_start_alignment_factor), and rank r owns the r-th of world_size equal partitions, so
// any padding sits at the end of the last rank(s). A group may be held by a subset of the ranks (expert
// parallelism's expert-data-parallel groups): then only its holders split it, padded to alignment * holders,
// and every other rank owns none of it. The map is stored as JSON in every checkpoint shard (one map, the
// same in every shard), which is all `hftrain zero-to-fp32` needs to rebuild the full weights.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hftrain {

struct FlatParamInfo {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;       // first element in the group's flat buffer
  int64_t numel = 0;
  int64_t model_index = 0;  // position among the model's trainable parameters (backward readiness order)
};

struct FlatGroupInfo {
  double weight_decay = 0;
  std::vector<FlatParamInfo> params;
  std::vector<int> ranks;      // the global ranks that hold the group, ascending (0..world_size-1 when all do)
  int64_t numel = 0;           // sum of the parameters' elements
  int64_t padded_numel = 0;    // numel rounded up to a multiple of alignment * holders()
  int64_t partition_size = 0;  // a holder's partition length: padded_numel / holders()

  int holders() const { return static_cast<int>(ranks.size()); }
  int member(int rank) const;  // index of `rank` in ranks, -1 when it does not hold the group
  bool held_by(int rank) const { return member(rank) >= 0; }
  // Where `rank`'s partition starts in the flat buffer (0 for a rank that does not hold the group).
  int64_t partition_begin(int rank) const;
  // Elements `rank` owns, padding included: partition_size for a holder, 0 for any other rank.
  int64_t partition_numel(int rank) const { return held_by(rank) ? partition_size : 0; }
  // Elements of real (not padding) data in `rank`'s partition.
  int64_t partition_real(int rank) const;
};

struct PartitionMap {
  int world_size = 1;
  int64_t alignment = 2;
  std::vector<FlatGroupInfo> groups;

  struct GroupInput {
    std::vector<std::string> names;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<int64_t> model_index;
    double weight_decay = 0;
    std::vector<int> ranks;  // the ranks that hold the group, ascending; empty = every rank
  };
  // Throws RuntimeFailure when a group's ranks are not ascending, unique and in [0, world_size).
  static PartitionMap build(const std::vector<GroupInput>& groups, int world_size, int64_t alignment = 2);

  int64_t total_numel() const;
  int64_t total_padded() const;
  int64_t partition_numel(int rank) const;  // elements `rank` owns over all groups (with padding)

  // A group's "ranks" is written only when some rank does not hold it, so the maps of runs without such groups
  // read as before.
  nlohmann::json to_json() const;
  // Parses and validates (offsets contiguous, sizes consistent, ranks ascending and in range; no "ranks" means
  // every rank); errors name `source` and the group.
  static PartitionMap from_json(const nlohmann::json& j, const std::string& source);
};

// [begin, end) ∩ [other_begin, other_end) as a length (0 when disjoint).
inline int64_t overlap(int64_t begin, int64_t end, int64_t other_begin, int64_t other_end) {
  const int64_t b = begin > other_begin ? begin : other_begin;
  const int64_t e = end < other_end ? end : other_end;
  return e > b ? e - b : 0;
}

}  // namespace hftrain
