// CheckpointReader: reads the files of one checkpoint directory, each checked against manifest.json
// (size and xxh64) as it is read, with errors that name the file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/manifest.h"
#include "checkpoint/safetensors.h"

namespace hftrain {

class CheckpointReader {
 public:
  // Reads the manifest; throws RuntimeFailure when it is missing or malformed.
  explicit CheckpointReader(std::string dir);

  const std::string& dir() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }
  std::string path(const std::string& name) const;
  bool has(const std::string& name) const { return manifest_.find(name) != nullptr; }

  std::vector<char> bytes(const std::string& name) const;
  std::string text(const std::string& name) const;
  nlohmann::json json(const std::string& name) const;
  SafetensorsFile safetensors(const std::string& name) const;

 private:
  std::string dir_;
  Manifest manifest_;
};

}  // namespace hftrain
