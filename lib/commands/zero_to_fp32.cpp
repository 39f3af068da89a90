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

namespace {

// The tag folder: checkpoint-N/latest -> global_stepN/, or the folder itself.
fs::path find_tag_dir(const fs::path& ckpt) {
  if (fs::exists(ckpt / kZeroModelStatesFile)) return ckpt;
  if (const std::string tag = read_zero_tag(ckpt.string()); !tag.empty()) {
    const fs::path tag_dir = ckpt / tag;
    if (!fs::is_directory(tag_dir))
      throw RuntimeFailure("'" + (ckpt / "latest").string() + "' names '" + tag + "' but '" + tag_dir.string() + "' does not exist");
    return tag_dir;
  }
  if (fs::exists(ckpt / "model.safetensors"))
    throw RuntimeFailure("zero-to-fp32: '" + ckpt.string() + "' has no ZeRO shards (no 'latest' file): it was saved with "
                         "zero.stage 0, and its model.safetensors already holds the full fp32 weights");
  throw RuntimeFailure("zero-to-fp32: '" + ckpt.string() + "' is not a checkpoint directory (no 'latest' file and no " +
                       kZeroModelStatesFile + ")");
}

// A ZeRO checkpoint's files, read and checked against each other. Pieces point into states and shards, so the
// value stays where it was built while they are in use.
struct ZeroCheckpoint {
  fs::path tag_dir, states_path;
  Header states;
  int world = 0;
  nlohmann::json order;
  std::vector<Header> shards;
  std::string partition_text, stage;
  PartitionMap map;
};

void read_model_states(ZeroCheckpoint& z) {
  z.states_path = z.tag_dir / kZeroModelStatesFile;
  if (!fs::exists(z.states_path)) throw RuntimeFailure("missing ZeRO model states file '" + z.states_path.string() + "'");
  z.states = read_header(z.states_path.string());
  try {
    z.world = std::stoi(z.states.meta("world_size"));
  } catch (const std::invalid_argument&) {
    z.world = 0;
  }
  if (z.world < 1) throw RuntimeFailure("'" + z.states_path.string() + "': bad world_size metadata");
  try {
    z.order = nlohmann::json::parse(z.states.meta("tensor_order"));
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeFailure("'" + z.states_path.string() + "': bad tensor_order metadata: " + e.what());
  }
}

// Every rank's shard must be there, and no other.
void read_shards(ZeroCheckpoint& z) {
  for (int r = 0; r < z.world; ++r) {
    const fs::path p = z.tag_dir / zero_shard_file_name(r);
    if (!fs::exists(p))
      throw RuntimeFailure("missing ZeRO shard '" + p.string() + "': the checkpoint was saved by " + std::to_string(z.world) +
                           " workers (" + z.states_path.string() + ")");
    z.shards.push_back(read_header(p.string()));
  }
  for (const auto& entry : fs::directory_iterator(z.tag_dir)) {
    static const std::regex shard_re("zero_pp_rank_([0-9]+)_mp_rank_00_optim_states\\.safetensors");
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, m, shard_re) && std::stoll(m[1].str()) >= z.world)
      throw RuntimeFailure("unexpected ZeRO shard '" + entry.path().string() + "': '" + z.states_path.string() +
                           "' says the checkpoint was saved by " + std::to_string(z.world) + " workers");
  }
}

void read_partition_map(ZeroCheckpoint& z) {
  z.partition_text = z.shards[0].meta("partition");
  z.map = PartitionMap::from_json(nlohmann::json::parse(z.partition_text, nullptr, false), z.shards[0].path);
  if (z.map.world_size != z.world)
    throw RuntimeFailure("'" + z.shards[0].path + "': partition world_size " + std::to_string(z.map.world_size) +
                         " disagrees with '" + z.states_path.string() + "' (" + std::to_string(z.world) + ")");
  z.stage = z.shards[0].meta("zero_stage");
}

// Rank r's shard agrees with the first shard and the model states, and holds its partition of every group.
void check_shard(const ZeroCheckpoint& z, int r) {
  const Header& s = z.shards[static_cast<std::size_t>(r)];
  const Header& first = z.shards[0];
  if (s.meta("rank") != std::to_string(r))
    throw RuntimeFailure("'" + s.path + "': metadata says rank " + s.meta("rank") + ", expected " + std::to_string(r));
  if (s.meta("world_size") != std::to_string(z.world))
    throw RuntimeFailure("'" + s.path + "': metadata world_size " + s.meta("world_size") + " disagrees with '" +
                         z.states_path.string() + "' (" + std::to_string(z.world) + ")");
  if (s.meta("zero_stage") != z.stage || s.meta("partition") != z.partition_text)
    throw RuntimeFailure("'" + s.path + "': metadata (zero_stage / partition) disagrees with '" + first.path +
                         "': the shards come from different checkpoints");
  if (s.metadata.count("global_step") && first.metadata.count("global_step") &&
      s.meta("global_step") != first.meta("global_step"))
    throw RuntimeFailure("'" + s.path + "': global_step " + s.meta("global_step") + " disagrees with '" + first.path +
                         "' (" + first.meta("global_step") + ")");
  for (std::size_t g = 0; g < z.map.groups.size(); ++g) {
    const std::string key = "fp32_flat_group_" + std::to_string(g);
    if (!z.map.groups[g].held_by(r) && !s.tensors.count(key)) continue;  // a group this rank does not hold
    const TensorEntry& e = s.tensor(key);
    const int64_t real = z.map.groups[g].partition_real(r);
    if (e.dtype != "F32" || e.end - e.begin != static_cast<uint64_t>(real) * 4)
      throw RuntimeFailure("'" + s.path + "': tensor 'fp32_flat_group_" + std::to_string(g) + "' holds " +
                           std::to_string((e.end - e.begin) / 4) + " fp32 values, the partition metadata says " +
                           std::to_string(real));
  }
}

// A partitioned parameter: its bytes from each partition of its group (its holders', in member order) that
// holds some of them.
OutTensor plan_partitioned(const ZeroCheckpoint& z, std::size_t g, const FlatParamInfo& p) {
  const FlatGroupInfo& info = z.map.groups[g];
  OutTensor t;
  t.name = p.name;
  t.dtype = "F32";
  t.shape = p.shape;
  t.bytes = static_cast<uint64_t>(p.numel) * 4;
  for (const int r : info.ranks) {
    const int64_t part_begin = info.partition_begin(r);
    const int64_t n = overlap(p.offset, p.offset + p.numel, part_begin, part_begin + info.partition_real(r));
    if (n == 0) continue;
    const int64_t lo = std::max(p.offset, part_begin);
    const Header& shard = z.shards[static_cast<std::size_t>(r)];
    const TensorEntry& e = shard.tensor("fp32_flat_group_" + std::to_string(g));
    t.pieces.push_back({&shard, e.begin + static_cast<uint64_t>(lo - part_begin) * 4, static_cast<uint64_t>(n) * 4});
  }
  return t;
}

// The output tensors, partitioned ones and the model states' own, by name.
std::map<std::string, OutTensor> plan_tensors(const ZeroCheckpoint& z) {
  std::map<std::string, OutTensor> planned;
  for (std::size_t g = 0; g < z.map.groups.size(); ++g)
    for (const auto& p : z.map.groups[g].params) planned.emplace(p.name, plan_partitioned(z, g, p));
  for (const auto& [name, e] : z.states.tensors) {
    if (planned.count(name)) throw RuntimeFailure("'" + z.states_path.string() + "': tensor '" + name + "' is also partitioned");
    OutTensor t;
    t.name = name;
    t.dtype = e.dtype;
    t.shape = e.shape;
    t.bytes = e.end - e.begin;
    t.pieces.push_back({&z.states, e.begin, t.bytes});
    planned.emplace(name, std::move(t));
  }
  return planned;
}

// The planned tensors in the model's order (tensor_order), every one of them.
std::vector<const OutTensor*> in_model_order(const ZeroCheckpoint& z, const std::map<std::string, OutTensor>& planned) {
  std::vector<const OutTensor*> ordered;
  for (const auto& n : z.order) {
    auto it = planned.find(n.get<std::string>());
    if (it == planned.end())
      throw RuntimeFailure("'" + z.states_path.string() + "': tensor '" + n.get<std::string>() +
                           "' of the model is in no shard and not in the model states");
    ordered.push_back(&it->second);
  }
  if (ordered.size() != planned.size())
    throw RuntimeFailure("'" + z.states_path.string() + "': tensor_order lists " + std::to_string(ordered.size()) +
                         " tensors but the shards and model states hold " + std::to_string(planned.size()));
  return ordered;
}

// Split like HF's split_torch_state_dict_into_shards: a new file when the next tensor would overflow.
std::vector<std::vector<const OutTensor*>> split_into_files(const std::vector<const OutTensor*>& ordered, uint64_t max_shard) {
  std::vector<std::vector<const OutTensor*>> files(1);
  uint64_t current = 0;
  for (const auto* t : ordered) {
    if (!files.back().empty() && current + t->bytes > max_shard) {
      files.emplace_back();
      current = 0;
    }
    files.back().push_back(t);
    current += t->bytes;
  }
  return files;
}

fs::path make_output_dir(const ZeroToFp32Request& request, const fs::path& ckpt) {
  fs::path out = request.output.empty() ? ckpt.lexically_normal().parent_path() / ("fp32-" + ckpt.lexically_normal().filename().string())
                                        : fs::path(request.output);
  if (request.output.empty() && ckpt.lexically_normal().filename().empty()) out = ckpt / "fp32";
  std::error_code ec;
  fs::create_directories(out, ec);
  if (!fs::is_directory(out)) throw RuntimeFailure("cannot create output directory '" + out.string() + "': " + ec.message());
  return out;
}

std::vector<std::string> weight_file_names(std::size_t nfiles) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < nfiles; ++i) {
    char name[64];
    if (nfiles == 1) std::snprintf(name, sizeof name, "model.safetensors");
    else std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, nfiles);
    names.push_back(name);
  }
  return names;
}

// Like save_pretrained: remove weight files of a previous, differently split conversion.
void remove_stale_weights(const fs::path& out, const std::vector<std::string>& written) {
  static const std::regex stale_re("model-[0-9]{5}-of-[0-9]{5}\\.safetensors|model\\.safetensors(\\.index\\.json)?");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, stale_re) && std::find(written.begin(), written.end(), name) == written.end() &&
        !(written.size() > 1 && name == "model.safetensors.index.json"))
      fs::remove(entry.path(), ec);
  }
}

// The weight files, the index when there are several, and config.json when the model states carry one.
void write_model_dir(const fs::path& out, const std::vector<std::vector<const OutTensor*>>& files,
                     const std::vector<std::string>& written, uint64_t total, const Header& states) {
  const std::size_t nfiles = files.size();
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
}

void print_summary(const ZeroCheckpoint& z, std::size_t tensors, uint64_t total, const fs::path& out,
                   const std::vector<std::string>& written, double seconds, int64_t baseline_kib) {
  const std::size_t nfiles = written.size();
  // VmHWM: the peak of this process image (getrusage's maxrss would include the parent's image before exec).
  const double peak = static_cast<double>(rss_kib("VmHWM:")) * 1024.0;
  std::cout << "zero-to-fp32: " << tensors << " tensors (" << mib(static_cast<double>(total)) << ") from " << z.world
            << " shard(s) of zero stage " << z.stage << " in " << z.tag_dir.string() << " -> " << out.string() << "/"
            << (nfiles == 1 ? written[0] : std::to_string(nfiles) + " files + model.safetensors.index.json") << std::endl;
  char line[256];
  std::snprintf(line, sizeof line, "zero-to-fp32: %.2f s, peak RSS %s (at start %s; output %s)", seconds, mib(peak).c_str(),
                mib(static_cast<double>(baseline_kib) * 1024.0).c_str(), mib(static_cast<double>(total)).c_str());
  std::cout << line << std::endl;
}

}  // namespace

int run_zero_to_fp32(const ZeroToFp32Request& request) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t baseline_kib = rss_kib("VmRSS:");
  const fs::path ckpt = fs::path(request.checkpoint_dir);
  if (!fs::is_directory(ckpt)) throw ConfigError("zero-to-fp32: '" + ckpt.string() + "' is not a directory");
  const uint64_t max_shard = parse_size(request.max_shard_size);

  ZeroCheckpoint z;
  z.tag_dir = find_tag_dir(ckpt);
  read_model_states(z);
  read_shards(z);
  read_partition_map(z);
  for (int r = 0; r < z.world; ++r) check_shard(z, r);

  const std::map<std::string, OutTensor> planned = plan_tensors(z);
  const std::vector<const OutTensor*> ordered = in_model_order(z, planned);
  const auto files = split_into_files(ordered, max_shard);
  uint64_t total = 0;
  for (const auto* t : ordered) total += t->bytes;

  const fs::path out = make_output_dir(request, ckpt);
  const std::vector<std::string> written = weight_file_names(files.size());
  remove_stale_weights(out, written);
  write_model_dir(out, files, written, total, z.states);

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  print_summary(z, ordered.size(), total, out, written, seconds, baseline_kib);
  return 0;
}

}  // namespace hftrain
