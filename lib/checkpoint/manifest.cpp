// Checkpoint manifest (see manifest.h).
#include "checkpoint/manifest.h"

#include <xxhash.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>

#include "checkpoint/checkpoint_files.h"
#include "util/error.h"
#include "util/fs.h"

namespace hftrain {
namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "hftrain-checkpoint";
constexpr int kVersion = 1;

uint64_t parse_hex(const std::string& s, const std::string& source) {
  if (s.size() != 16) throw RuntimeFailure("'" + source + "': xxh64 '" + s + "' is not 16 hex digits");
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else throw RuntimeFailure("'" + source + "': xxh64 '" + s + "' is not lower-case hex");
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  return v;
}

}  // namespace

bool is_safe_relative_path(const std::string& name) {
  if (name.empty() || name.front() == '/' || name.back() == '/') return false;
  std::size_t start = 0;
  while (start <= name.size()) {
    const std::size_t end = std::min(name.find('/', start), name.size());
    const std::string part = name.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

uint64_t xxh64_of(const void* data, std::size_t size) { return XXH64(data, size, 0); }

std::string xxh64_hex(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, h);
  return buf;
}

const ManifestEntry* Manifest::find(const std::string& name) const {
  for (const auto& e : files)
    if (e.name == name) return &e;
  return nullptr;
}

nlohmann::json Manifest::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& e : files) list.push_back({{"name", e.name}, {"size", e.size}, {"xxh64", xxh64_hex(e.xxh64)}});
  nlohmann::json j = {{"format", kFormat},
                      {"version", kVersion},
                      {"global_step", global_step},
                      {"save_only_model", save_only_model},
                      {"files", list}};
  if (!layout.is_null()) j["layout"] = layout;
  return j;
}

Manifest Manifest::from_json(const nlohmann::json& j, const std::string& source) {
  auto fail = [&](const std::string& why) { return RuntimeFailure("'" + source + "': " + why); };
  if (!j.is_object() || j.value("format", "") != kFormat) throw fail("not an hftrain checkpoint manifest");
  if (j.value("version", 0) != kVersion)
    throw fail("manifest version " + j.value("version", nlohmann::json()).dump() + " is not supported (expected " +
               std::to_string(kVersion) + ")");
  Manifest m;
  try {
    m.global_step = j.at("global_step").get<int64_t>();
    m.save_only_model = j.value("save_only_model", false);
    if (j.contains("layout")) m.layout = j.at("layout");
    for (const auto& e : j.at("files")) {
      ManifestEntry entry;
      entry.name = e.at("name").get<std::string>();
      entry.size = e.at("size").get<uint64_t>();
      entry.xxh64 = parse_hex(e.at("xxh64").get<std::string>(), source);
      if (!is_safe_relative_path(entry.name)) throw fail("file name '" + entry.name + "' is not a relative path inside the checkpoint");
      m.files.push_back(entry);
    }
  } catch (const nlohmann::json::exception& e) {
    throw fail(std::string("malformed manifest: ") + e.what());
  }
  return m;
}

Manifest read_manifest(const std::string& dir) {
  const std::string path = (fs::path(dir) / ckpt::kManifestFile).string();
  if (!fs::exists(path)) throw RuntimeFailure("'" + path + "' is missing (the checkpoint is incomplete)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeFailure("'" + path + "' is not valid JSON: " + e.what());
  }
  return Manifest::from_json(j, path);
}

std::vector<char> read_verified_file(const std::string& dir, const Manifest& manifest, const std::string& name) {
  const std::string path = (fs::path(dir) / name).string();
  const ManifestEntry* e = manifest.find(name);
  if (!e) throw RuntimeFailure("'" + path + "' is not listed in " + ckpt::kManifestFile);
  if (!fs::exists(path)) throw RuntimeFailure("'" + path + "' is missing");
  std::vector<char> bytes = read_binary_file(path);
  if (bytes.size() != e->size)
    throw RuntimeFailure("'" + path + "' is " + std::to_string(bytes.size()) + " bytes but the manifest records " +
                         std::to_string(e->size) + " (truncated or overwritten)");
  const uint64_t h = xxh64_of(bytes.data(), bytes.size());
  if (h != e->xxh64)
    throw RuntimeFailure("'" + path + "' is corrupt: xxh64 " + xxh64_hex(h) + " does not match the manifest's " +
                         xxh64_hex(e->xxh64));
  return bytes;
}

FileDigest digest_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw RuntimeFailure("'" + path + "' is missing");
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  std::vector<char> buf(1 << 20);
  FileDigest d;
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
    XXH64_update(state, buf.data(), n);
    d.size += n;
  }
  const bool read_error = std::ferror(f) != 0;
  std::fclose(f);
  d.xxh64 = XXH64_digest(state);
  XXH64_freeState(state);
  if (read_error) throw RuntimeFailure("'" + path + "' could not be read");
  return d;
}

std::string verify_checkpoint(const std::string& dir) {
  try {
    const Manifest m = read_manifest(dir);
    for (const auto& e : m.files) {
      const std::string path = (fs::path(dir) / e.name).string();
      const FileDigest d = digest_file(path);  // streamed: verifying needs no memory for the files
      if (d.size != e.size)
        return "'" + path + "' is " + std::to_string(d.size) + " bytes but the manifest records " +
               std::to_string(e.size) + " (truncated or overwritten)";
      if (d.xxh64 != e.xxh64)
        return "'" + path + "' is corrupt: xxh64 " + xxh64_hex(d.xxh64) + " does not match the manifest's " +
               xxh64_hex(e.xxh64);
    }
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace hftrain
