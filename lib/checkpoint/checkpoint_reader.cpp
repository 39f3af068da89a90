// Verified checkpoint reading (see checkpoint_reader.h).
#include "checkpoint/checkpoint_reader.h"

#include <filesystem>

#include "util/error.h"

namespace hftrain {

CheckpointReader::CheckpointReader(std::string dir) : dir_(std::move(dir)), manifest_(read_manifest(dir_)) {}

std::string CheckpointReader::path(const std::string& name) const {
  return (std::filesystem::path(dir_) / name).string();
}

std::vector<char> CheckpointReader::bytes(const std::string& name) const {
  return read_verified_file(dir_, manifest_, name);
}

std::string CheckpointReader::text(const std::string& name) const {
  const std::vector<char> b = bytes(name);
  return std::string(b.begin(), b.end());
}

nlohmann::json CheckpointReader::json(const std::string& name) const {
  try {
    return nlohmann::json::parse(text(name));
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeFailure("'" + path(name) + "' is not valid JSON: " + e.what());
  }
}

SafetensorsFile CheckpointReader::safetensors(const std::string& name) const {
  return parse_safetensors(bytes(name), path(name));
}

}  // namespace hftrain
