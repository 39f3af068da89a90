// CheckpointWriter: commits one checkpoint directory atomically.
//   1. files are written into the hidden sibling output_dir/.checkpoint-N.partial, each fsynced;
//   2. manifest.json (size + xxh64 of every file) is written last, then the directory is fsynced;
//   3. the directory is renamed to output_dir/checkpoint-N and output_dir is fsynced.
// A crash at any point leaves either no checkpoint-N or a complete one; the hidden leftovers are
// never picked by resume and are removed by remove_stale_temporaries() on the next save. Every
// durable action is a fault-injection write step (see fault_injection.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/manifest.h"

namespace hftrain {

class CheckpointWriter {
 public:
  // Creates the temporary directory (replacing a stale one). Throws RuntimeFailure naming it.
  CheckpointWriter(std::string output_dir, int64_t step);
  // Removes the temporary directory when commit() was not reached (an error mid-save).
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Writes one file durably; throws RuntimeFailure naming the file (e.g. "No space left on device").
  // `name` may contain subdirectories ("global_step8/shard.safetensors"); they are created.
  void add(const std::string& name, const std::string& bytes);
  // The temporary directory, for writers that put files there themselves (e.g. ZeRO shards written
  // by every rank); adopt() then fsyncs such a file and records it in the manifest.
  const std::string& tmp_dir() const { return tmp_dir_; }
  void adopt(const std::string& name);
  // Recorded in the manifest as its "layout" (see manifest.h).
  void set_layout(nlohmann::json layout) { layout_ = std::move(layout); }
  // Writes the manifest and renames the directory into place (replacing an existing checkpoint-N).
  // Returns the final directory path.
  std::string commit(bool save_only_model);

 private:
  void refuse_repeat(const std::string& name) const;  // a file given twice is a RuntimeFailure
  std::string output_dir_;
  int64_t step_;
  std::string tmp_dir_;
  std::vector<ManifestEntry> entries_;
  nlohmann::json layout_;
  bool committed_ = false;
};

// Writes `bytes` to `path` with open/write/fsync/close, each part a fault-injection write step.
void write_file_durably(const std::string& path, const std::string& bytes);

// Removes .checkpoint-N.{partial,old,deleting} directories a crash left in output_dir.
void remove_stale_temporaries(const std::string& output_dir);

}  // namespace hftrain
