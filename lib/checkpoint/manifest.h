// manifest.json: the completeness record of a checkpoint. It lists every other file of the
// checkpoint with its size and xxh64 checksum and is the last file written before the directory is
// renamed into place, so "manifest present and every file matches it" means "checkpoint complete".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hftrain {

struct ManifestEntry {
  std::string name;  // path relative to the checkpoint directory ("model.safetensors", "global_step8/x")
  uint64_t size = 0;
  uint64_t xxh64 = 0;
};

struct Manifest {
  int64_t global_step = 0;
  bool save_only_model = false;  // no optimizer / scheduler / RNG / loop state: not resumable
  std::vector<ManifestEntry> files;
  // How the training state is laid out (world_size, zero_stage, dtypes, optimizer, the partition map of
  // sharded runs); null when the writer did not say (older checkpoints).
  nlohmann::json layout;

  const ManifestEntry* find(const std::string& name) const;
  nlohmann::json to_json() const;
  // Throws RuntimeFailure naming `source` when the JSON is not a manifest.
  static Manifest from_json(const nlohmann::json& j, const std::string& source);
};

// A relative path without empty, "." or ".." components (so a manifest cannot point outside its checkpoint).
bool is_safe_relative_path(const std::string& name);

// xxh64 (seed 0) of a byte range, and as the 16-digit lower-case hex string used in manifest.json.
uint64_t xxh64_of(const void* data, std::size_t size);
std::string xxh64_hex(uint64_t h);

// Size and xxh64 of a file, read in 1 MiB blocks; throws RuntimeFailure naming it when missing or unreadable.
struct FileDigest {
  uint64_t size = 0;
  uint64_t xxh64 = 0;
};
FileDigest digest_file(const std::string& path);

// Reads <dir>/manifest.json. Throws RuntimeFailure naming the file when missing or malformed.
Manifest read_manifest(const std::string& dir);

// Checks every file listed in the manifest: present, the recorded size, the recorded checksum.
// Returns "" when the checkpoint is complete, else a one-line problem naming the file.
std::string verify_checkpoint(const std::string& dir);

// Reads one file of a checkpoint and checks it against its manifest entry; throws RuntimeFailure
// naming the file when it is not listed, missing, truncated or corrupt.
std::vector<char> read_verified_file(const std::string& dir, const Manifest& manifest, const std::string& name);

}  // namespace hftrain
