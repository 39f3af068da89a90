// zero-to-fp32: full fp32 weights from ZeRO checkpoint shards, streamed (see zero_to_fp32.h).
// The rebuild follows DeepSpeed's utils/zero_to_fp32.py for stages 1-2 (concatenate the
// ranks' partitions of each group and cut the parameters out in group order), but never materialises
// a group: each parameter's bytes are copied straight from the partitions that hold them.
#include "commands/zero_to_fp32.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <vector>

#include "checkpoint/safetensors.h"
#include "engine/partition.h"
#include "engine/zero_checkpoint.h"
#include "util/error.h"
#include "util/fd_io.h"
#include "util/fs.h"

namespace hftrain {
namespace fs = std::filesystem;
namespace {

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }

 private:
  int fd_;
};

void read_exact(int fd, uint64_t offset, char* dst, uint64_t n, const std::string& path) {
  while (n > 0) {
    ssize_t got = ::pread(fd, dst, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw RuntimeFailure("'" + path + "': short read at byte " + std::to_string(offset) + " (truncated file?)");
    dst += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<uint64_t>(got);
  }
}

// The header of a safetensors file, without its data.
struct TensorEntry {
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // absolute offsets in the file
};

struct Header {
  std::string path;
  std::shared_ptr<Fd> fd;
  std::map<std::string, TensorEntry> tensors;
  std::map<std::string, std::string> metadata;

  const std::string& meta(const std::string& key) const {
    auto it = metadata.find(key);
    if (it == metadata.end()) throw RuntimeFailure("'" + path + "': metadata has no '" + key + "' (not an hftrain ZeRO file?)");
    return it->second;
  }
  const TensorEntry& tensor(const std::string& name) const {
    auto it = tensors.find(name);
    if (it == tensors.end()) throw RuntimeFailure("'" + path + "': tensor '" + name + "' is missing");
    return it->second;
  }
};

// The header is read by the one safetensors header reader (checkpoint/safetensors.h); the file stays open for
// the byte-range reads of the merge.
Header read_header(const std::string& path) {
  const SafetensorsHeader parsed = read_safetensors_header(path);
  Header h;
  h.path = path;
  h.fd = std::make_shared<Fd>(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (h.fd->get() < 0) throw RuntimeFailure("cannot open '" + path + "': " + errno_text());
  for (const auto& e : parsed.tensors)
    h.tensors.emplace(e.name, TensorEntry{e.dtype, e.shape, parsed.data_start + e.begin, parsed.data_start + e.end});
  h.metadata = parsed.metadata;
  return h;
}

// A contiguous byte range of one input file.
struct Piece {
  const Header* file;
  uint64_t offset, length;
};

struct OutTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
  std::vector<Piece> pieces;
};

void copy_range(const Piece& piece, int out_fd, std::vector<char>& bounce, bool& use_copy_file_range) {
  uint64_t off = piece.offset, left = piece.length;
  const int in_fd = piece.file->fd->get();
  while (left > 0 && use_copy_file_range) {
    loff_t in_off = static_cast<loff_t>(off);
    ssize_t n = ::copy_file_range(in_fd, &in_off, out_fd, nullptr, left, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) throw RuntimeFailure("'" + piece.file->path + "': unexpected end of file at byte " + std::to_string(off));
      use_copy_file_range = false;  // EXDEV, ENOSYS, EINVAL...: fall back to read/write
      break;
    }
    off += static_cast<uint64_t>(n);
    left -= static_cast<uint64_t>(n);
  }
  while (left > 0) {
    if (bounce.empty()) bounce.resize(8u << 20);  // only when copy_file_range is unavailable
    const uint64_t chunk = std::min<uint64_t>(left, bounce.size());
    read_exact(in_fd, off, bounce.data(), chunk, piece.file->path);
    if (!write_all(out_fd, bounce.data(), chunk)) throw RuntimeFailure("write failed: " + errno_text());
    off += chunk;
    left -= chunk;
  }
}

// Writes one safetensors file exactly as save_safetensors would (same header text, same data order).
void write_output(const std::string& path, const std::vector<const OutTensor*>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const auto* t : tensors) {
    header[t->name] = {{"dtype", t->dtype}, {"shape", t->shape}, {"data_offsets", {offset, offset + t->bytes}}};
    offset += t->bytes;
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0) h += ' ';
  const std::string tmp = path + ".tmp";
  Fd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (out.get() < 0) throw RuntimeFailure("cannot write '" + path + "': " + errno_text());
  try {
    std::string head(8, '\0');
    const uint64_t n = h.size();
    for (int i = 0; i < 8; ++i) head[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
    head += h;
    if (!write_all(out.get(), head)) throw RuntimeFailure("cannot write '" + path + "': " + errno_text());
    std::vector<char> bounce;
    bool use_cfr = true;
    for (const auto* t : tensors)
      for (const auto& piece : t->pieces) copy_range(piece, out.get(), bounce, use_cfr);
    if (::fsync(out.get()) != 0) throw RuntimeFailure("cannot write '" + path + "': " + errno_text());
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(out.release());
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = errno_text();
    ::unlink(tmp.c_str());
    throw RuntimeFailure("cannot write '" + path + "': " + why);
  }
}

int64_t rss_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::atoll(line.c_str() + std::strlen(field));
  return 0;
}

std::string mib(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

uint64_t parse_size(const std::string& text, const std::string& option) {
  std::string s;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) s += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const std::vector<std::pair<std::string, double>> units = {
      {"TIB", 1099511627776.0}, {"GIB", 1073741824.0}, {"MIB", 1048576.0}, {"KIB", 1024.0}, {"TB", 1e12},
      {"GB", 1e9},              {"MB", 1e6},           {"KB", 1e3},        {"B", 1.0}};
  double mult = 1.0;
  std::string number = s;
  for (const auto& [u, m] : units)
    if (s.size() > u.size() && s.compare(s.size() - u.size(), u.size(), u) == 0) {
      mult = m;
      number = s.substr(0, s.size() - u.size());
      break;
    }
  std::size_t used = 0;
  double v = -1;
  try {
    v = std::stod(number, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != number.size() || !(v > 0))
    throw ConfigError(option + " '" + text + "': expected a positive size such as 5GB, 500MB, 2GiB or a byte count");
  return static_cast<uint64_t>(v * mult);
}

int run_zero_to_fp32(const ZeroToFp32Request& request) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t baseline_kib = rss_kib("VmRSS:");
  const fs::path ckpt = fs::path(request.checkpoint_dir);
  if (!fs::is_directory(ckpt)) throw ConfigError("zero-to-fp32: '" + ckpt.string() + "' is not a directory");
  const uint64_t max_shard = parse_size(request.max_shard_size);

  // Locate the tag folder: checkpoint-N/latest -> global_stepN/, or the folder itself.
  fs::path tag_dir;
  if (fs::exists(ckpt / kZeroModelStatesFile)) {
    tag_dir = ckpt;
  } else if (const std::string tag = read_zero_tag(ckpt.string()); !tag.empty()) {
    tag_dir = ckpt / tag;
    if (!fs::is_directory(tag_dir))
      throw RuntimeFailure("'" + (ckpt / "latest").string() + "' names '" + tag + "' but '" + tag_dir.string() + "' does not exist");
  } else if (fs::exists(ckpt / "model.safetensors")) {
    throw RuntimeFailure("zero-to-fp32: '" + ckpt.string() + "' has no ZeRO shards (no 'latest' file): it was saved with "
                         "zero.stage 0, and its model.safetensors already holds the full fp32 weights");
  } else {
    throw RuntimeFailure("zero-to-fp32: '" + ckpt.string() + "' is not a checkpoint directory (no 'latest' file and no " +
                         kZeroModelStatesFile + ")");
  }
  const fs::path states_path = tag_dir / kZeroModelStatesFile;
  if (!fs::exists(states_path)) throw RuntimeFailure("missing ZeRO model states file '" + states_path.string() + "'");
  Header states = read_header(states_path.string());
  int world = 0;
  try {
    world = std::stoi(states.meta("world_size"));
  } catch (const std::invalid_argument&) {
    world = 0;
  }
  if (world < 1) throw RuntimeFailure("'" + states_path.string() + "': bad world_size metadata");
  nlohmann::json order;
  try {
    order = nlohmann::json::parse(states.meta("tensor_order"));
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeFailure("'" + states_path.string() + "': bad tensor_order metadata: " + e.what());
  }

  // Every rank's shard must be there, and no other.
  std::vector<Header> shards;
  for (int r = 0; r < world; ++r) {
    const fs::path p = tag_dir / zero_shard_file_name(r);
    if (!fs::exists(p))
      throw RuntimeFailure("missing ZeRO shard '" + p.string() + "': the checkpoint was saved by " + std::to_string(world) +
                           " workers (" + states_path.string() + ")");
    shards.push_back(read_header(p.string()));
  }
  for (const auto& entry : fs::directory_iterator(tag_dir)) {
    static const std::regex shard_re("zero_pp_rank_([0-9]+)_mp_rank_00_optim_states\\.safetensors");
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, m, shard_re) && std::stoll(m[1].str()) >= world)
      throw RuntimeFailure("unexpected ZeRO shard '" + entry.path().string() + "': '" + states_path.string() +
                           "' says the checkpoint was saved by " + std::to_string(world) + " workers");
  }
  const std::string partition_text = shards[0].meta("partition");
  const PartitionMap map = PartitionMap::from_json(nlohmann::json::parse(partition_text, nullptr, false), shards[0].path);
  if (map.world_size != world)
    throw RuntimeFailure("'" + shards[0].path + "': partition world_size " + std::to_string(map.world_size) +
                         " disagrees with '" + states_path.string() + "' (" + std::to_string(world) + ")");
  const std::string stage = shards[0].meta("zero_stage");
  for (int r = 0; r < world; ++r) {
    const Header& s = shards[static_cast<std::size_t>(r)];
    if (s.meta("rank") != std::to_string(r))
      throw RuntimeFailure("'" + s.path + "': metadata says rank " + s.meta("rank") + ", expected " + std::to_string(r));
    if (s.meta("world_size") != std::to_string(world))
      throw RuntimeFailure("'" + s.path + "': metadata world_size " + s.meta("world_size") + " disagrees with '" +
                           states_path.string() + "' (" + std::to_string(world) + ")");
    if (s.meta("zero_stage") != stage || s.meta("partition") != partition_text)
      throw RuntimeFailure("'" + s.path + "': metadata (zero_stage / partition) disagrees with '" + shards[0].path +
                           "': the shards come from different checkpoints");
    if (s.metadata.count("global_step") && shards[0].metadata.count("global_step") &&
        s.meta("global_step") != shards[0].meta("global_step"))
      throw RuntimeFailure("'" + s.path + "': global_step " + s.meta("global_step") + " disagrees with '" + shards[0].path +
                           "' (" + shards[0].meta("global_step") + ")");
    for (std::size_t g = 0; g < map.groups.size(); ++g) {
      const TensorEntry& e = s.tensor("fp32_flat_group_" + std::to_string(g));
      const int64_t real = map.groups[g].partition_real(r);
      if (e.dtype != "F32" || e.end - e.begin != static_cast<uint64_t>(real) * 4)
        throw RuntimeFailure("'" + s.path + "': tensor 'fp32_flat_group_" + std::to_string(g) + "' holds " +
                             std::to_string((e.end - e.begin) / 4) + " fp32 values, the partition metadata says " +
                             std::to_string(real));
    }
  }

  // Plan the output tensors in the model's order.
  std::map<std::string, OutTensor> planned;
  for (std::size_t g = 0; g < map.groups.size(); ++g) {
    const FlatGroupInfo& info = map.groups[g];
    for (const auto& p : info.params) {
      OutTensor t;
      t.name = p.name;
      t.dtype = "F32";
      t.shape = p.shape;
      t.bytes = static_cast<uint64_t>(p.numel) * 4;
      for (int r = 0; r < world; ++r) {
        const int64_t part_begin = info.partition_begin(r);
        const int64_t n = overlap(p.offset, p.offset + p.numel, part_begin, part_begin + info.partition_real(r));
        if (n == 0) continue;
        const int64_t lo = std::max(p.offset, part_begin);
        const TensorEntry& e = shards[static_cast<std::size_t>(r)].tensor("fp32_flat_group_" + std::to_string(g));
        t.pieces.push_back({&shards[static_cast<std::size_t>(r)], e.begin + static_cast<uint64_t>(lo - part_begin) * 4,
                            static_cast<uint64_t>(n) * 4});
      }
      planned.emplace(p.name, std::move(t));
    }
  }
  for (const auto& [name, e] : states.tensors) {
    if (planned.count(name)) throw RuntimeFailure("'" + states_path.string() + "': tensor '" + name + "' is also partitioned");
    OutTensor t;
    t.name = name;
    t.dtype = e.dtype;
    t.shape = e.shape;
    t.bytes = e.end - e.begin;
    t.pieces.push_back({&states, e.begin, t.bytes});
    planned.emplace(name, std::move(t));
  }
  std::vector<const OutTensor*> ordered;
  for (const auto& n : order) {
    auto it = planned.find(n.get<std::string>());
    if (it == planned.end())
      throw RuntimeFailure("'" + states_path.string() + "': tensor '" + n.get<std::string>() +
                           "' of the model is in no shard and not in the model states");
    ordered.push_back(&it->second);
  }
  if (ordered.size() != planned.size())
    throw RuntimeFailure("'" + states_path.string() + "': tensor_order lists " + std::to_string(ordered.size()) +
                         " tensors but the shards and model states hold " + std::to_string(planned.size()));

  // Split like HF's split_torch_state_dict_into_shards: a new file when the next tensor would overflow.
  std::vector<std::vector<const OutTensor*>> files(1);
  uint64_t current = 0, total = 0;
  for (const auto* t : ordered) {
    if (!files.back().empty() && current + t->bytes > max_shard) {
      files.emplace_back();
      current = 0;
    }
    files.back().push_back(t);
    current += t->bytes;
    total += t->bytes;
  }

  fs::path out = request.output.empty() ? ckpt.lexically_normal().parent_path() / ("fp32-" + ckpt.lexically_normal().filename().string())
                                        : fs::path(request.output);
  if (request.output.empty() && ckpt.lexically_normal().filename().empty()) out = ckpt / "fp32";
  std::error_code ec;
  fs::create_directories(out, ec);
  if (!fs::is_directory(out)) throw RuntimeFailure("cannot create output directory '" + out.string() + "': " + ec.message());
  // Like save_pretrained: remove weight files of a previous, differently split conversion.
  static const std::regex stale_re("model-[0-9]{5}-of-[0-9]{5}\\.safetensors|model\\.safetensors(\\.index\\.json)?");
  std::vector<std::string> written;
  const std::size_t nfiles = files.size();
  for (std::size_t i = 0; i < nfiles; ++i) {
    char name[64];
    if (nfiles == 1) std::snprintf(name, sizeof name, "model.safetensors");
    else std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, nfiles);
    written.push_back(name);
  }
  for (const auto& entry : fs::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, stale_re) && std::find(written.begin(), written.end(), name) == written.end() &&
        !(nfiles > 1 && name == "model.safetensors.index.json"))
      fs::remove(entry.path(), ec);
  }
  for (std::size_t i = 0; i < nfiles; ++i) write_output((out / written[i]).string(), files[i]);
  if (nfiles > 1) {
    nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", nlohmann::json::object()}};
    for (std::size_t i = 0; i < nfiles; ++i)
      for (const auto* t : files[i]) index["weight_map"][t->name] = written[i];
    write_file_atomic((out / "model.safetensors.index.json").string(), index.dump(2) + "\n");
  }
  if (states.metadata.count("config")) {
    nlohmann::json config = nlohmann::json::parse(states.meta("config"), nullptr, false);
    if (!config.is_discarded()) write_file_atomic((out / "config.json").string(), config.dump(2) + "\n");
  }
  fsync_directory(out.string());

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // VmHWM: the peak of this process image (getrusage's maxrss would include the parent's image before exec).
  const double peak = static_cast<double>(rss_kib("VmHWM:")) * 1024.0;
  std::cout << "zero-to-fp32: " << ordered.size() << " tensors (" << mib(static_cast<double>(total)) << ") from " << world
            << " shard(s) of zero stage " << stage << " in " << tag_dir.string() << " -> " << out.string() << "/"
            << (nfiles == 1 ? written[0] : std::to_string(nfiles) + " files + model.safetensors.index.json") << std::endl;
  char line[256];
  std::snprintf(line, sizeof line, "zero-to-fp32: %.2f s, peak RSS %s (at start %s; output %s)", seconds, mib(peak).c_str(),
                mib(static_cast<double>(baseline_kib) * 1024.0).c_str(), mib(static_cast<double>(total)).c_str());
  std::cout << line << std::endl;
  return 0;
}

}  // namespace hftrain
