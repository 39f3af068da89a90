// Optimizer state in a swap file, streamed through aligned buffers (see swapped_optimizer.h).
#include "offload/swapped_optimizer.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "util/fault_injection.h"
#include "util/error.h"
#include "util/tensor_storage.h"

namespace hftrain {
namespace fs = std::filesystem;
namespace {

// The number of fp32 values per element the wrapped optimizer keeps, found by stepping a copy of it on
// a two-element parameter with learning rate 0.
int64_t probe_state_slots(const SwappedOptimizer::Factory& build, const ParamGroup& like) {
  ParamGroup g;
  g.names = {"probe"};
  g.weight_decay = like.weight_decay;
  auto p = torch::zeros({2});
  p.mutable_grad() = torch::zeros({2});
  g.params = {p};
  auto probe = build({g});
  probe->step(0.0);
  int64_t slots = 0;
  for (const auto& [k, t] : probe->state())
    if (t.scalar_type() == torch::kFloat32 && t.numel() == 2) ++slots;
  return slots;
}

// This rank's swap directory: a directory left by a run that is no longer alive is removed (with a
// message); one in use by a live process is refused.
void claim_swap_dir(const std::string& dir) {
  const fs::path owner = fs::path(dir) / "owner.pid";
  if (fs::exists(dir)) {
    long pid = 0;
    std::ifstream(owner) >> pid;
    if (pid > 0 && pid != ::getpid() && fs::exists("/proc/" + std::to_string(pid)))
      throw ConfigError("zero.offload_optimizer.nvme_path: '" + dir + "' is in use by a running process (pid " +
                        std::to_string(pid) + "); give each run its own nvme_path");
    std::cerr << "offload: removing the stale swap directory '" << dir << "' of a run that did not finish" << std::endl;
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw ConfigError("zero.offload_optimizer.nvme_path: cannot create '" + dir + "': " + ec.message());
  std::ofstream(owner) << ::getpid() << "\n";
}

// A state tensor the swap file holds: fp32, one value per element of the sub-group (not a step counter).
bool is_swapped_slot(const std::string& key, const torch::Tensor& t, int64_t numel) {
  return t.scalar_type() == torch::kFloat32 && t.numel() == numel &&
         !(key.size() > 5 && key.compare(key.size() - 5, 5, ".step") == 0);
}

bool has_swapped_state(const Optimizer& optimizer, int64_t numel) {
  for (const auto& [key, t] : optimizer.state())
    if (is_swapped_slot(key, t, numel)) return true;
  return false;
}

std::string human_bytes(int64_t b) { return std::to_string(b) + " bytes (" + std::to_string(b >> 20) + " MiB)"; }

void check_swap_options(const SwapOptions& options) {
  if (options.buffer_count < 3)
    throw ConfigError("zero.offload_optimizer.buffer_count must be at least 3 (reading, updating, writing back)");
  if (options.sub_group_size < 1) throw ConfigError("zero.sub_group_size must be at least 1");
}

// The swap file must fit the free space of the swap directory's filesystem.
void check_free_space(const SwapOptions& options, int64_t swap_bytes) {
  struct statvfs vfs {};
  if (::statvfs(options.swap_dir.c_str(), &vfs) != 0) return;
  const long long injected = fault::swap_free_bytes();
  const int64_t available = injected >= 0 ? injected : static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
  if (available < swap_bytes)
    throw ConfigError("zero.offload_optimizer.nvme_path: '" + options.swap_dir + "' needs " + human_bytes(swap_bytes) +
                      " for this rank's optimizer state" +
                      (options.swap_params ? std::string(options.swap_params16 ? " and parameters" : " and fp32 master weights")
                                           : std::string()) +
                      " but its filesystem has " + human_bytes(available) + " free");
}

}  // namespace

SwappedOptimizer::SwappedOptimizer(std::vector<ParamGroup> groups, const Factory& build, SwapOptions options)
    : groups_(std::move(groups)), options_(std::move(options)) {
  check_swap_options(options_);
  int64_t largest = 0;
  for (std::size_t g = 0; g < groups_.size(); ++g) largest = std::max(largest, add_subgroups(g, build));
  if (subgroups_.empty()) return;
  lay_out_swap_file(build, largest);
  claim_swap_dir(options_.swap_dir);
  try {  // from here on a failure removes the claimed directory (the destructor will not run)
    check_free_space(options_, swap_bytes_);
    file_ = std::make_unique<AioFile>((fs::path(options_.swap_dir) / "optimizer_state.swap").string(), swap_bytes_, options_.aio);
    for (int i = 0; i < options_.buffer_count; ++i) {
      Buffer b;
      b.memory = std::make_unique<AlignedBuffer>(stride_);
      buffers_.push_back(std::move(b));
    }
    if (options_.swap_params) write_initial_params();
  } catch (...) {
    file_.reset();
    std::error_code ec;
    fs::remove_all(options_.swap_dir, ec);
    throw;
  }
}

// Group g's flat partition cut into sub-groups of sub_group_size elements, each with an optimizer of its own;
// returns the largest sub-group's size.
int64_t SwappedOptimizer::add_subgroups(std::size_t g, const Factory& build) {
  const ParamGroup& group = groups_[g];
  if (group.params.size() != 1)
    throw RuntimeFailure("offload: each optimizer group must be one flat partition (got " +
                         std::to_string(group.params.size()) + " tensors)");
  const int64_t n = group.params[0].numel();
  if (options_.swap_params16 && (!options_.swap_params || group.params16.empty()))
    throw RuntimeFailure("offload: swapping the 16-bit parameters needs their fp32 masters swapped and given");
  int64_t largest = 0;
  for (int64_t begin = 0; begin < n; begin += options_.sub_group_size) {
    SubGroup s;
    s.group = g;
    s.begin = begin;
    s.numel = std::min(options_.sub_group_size, n - begin);
    ParamGroup sub = subgroup_params(s, group);
    s.slot_bytes = round_up_to_alignment(s.numel * 4);
    s.optimizer = build({sub});
    largest = std::max(largest, s.numel);
    subgroups_.push_back(std::move(s));
  }
  return largest;
}

// The parameter group sub-group `s` steps: its slice of the partition (a tensor of its own when swapped,
// holding memory only while the step has it in a buffer), of the 16-bit gradients and parameters.
ParamGroup SwappedOptimizer::subgroup_params(SubGroup& s, const ParamGroup& group) {
  ParamGroup sub;
  sub.names = group.names;
  sub.weight_decay = group.weight_decay;
  if (options_.swap_params) {
    s.view = torch::empty({s.numel}, torch::kFloat32);
    release_storage(s.view);
  } else {
    s.view = group.params[0].narrow(0, s.begin, s.numel);
  }
  sub.params = {s.view};
  if (!group.grads16.empty()) sub.grads16 = {group.grads16[0].narrow(0, s.begin, s.numel)};
  if (options_.swap_params16) {
    dtype16_ = group.params16[0].scalar_type();
    s.view16 = torch::empty({s.numel}, group.params16[0].options());
    release_storage(s.view16);
    s.slot16_bytes = round_up_to_alignment(s.numel * group.params16[0].element_size());
    sub.params16 = {s.view16};
  } else if (!group.params16.empty()) {
    sub.params16 = {group.params16[0].narrow(0, s.begin, s.numel)};
  }
  return sub;
}

// Each sub-group's region of the swap file (its parameter slices, then its state slots), and the file's size.
void SwappedOptimizer::lay_out_swap_file(const Factory& build, int64_t largest) {
  fuses_ = subgroups_.front().optimizer->fuses_low_precision();
  if (options_.swap_params && !groups_.front().params16.empty() && !fuses_)  // written while the slice is in its buffer
    throw RuntimeFailure("offload: swapping the fp32 master weights needs an optimizer that writes the 16-bit "
                         "parameters in its own pass (" + subgroups_.front().optimizer->kernel_description() + ")");
  const int64_t slots = probe_state_slots(build, groups_.front());
  const int64_t fp32_slots = slots + (options_.swap_params ? 1 : 0);
  stride_ = std::max<int64_t>(1, fp32_slots) * round_up_to_alignment(largest * 4) +
            (options_.swap_params16 ? round_up_to_alignment(largest * c10::elementSize(dtype16_)) : 0);
  for (std::size_t k = 0; k < subgroups_.size(); ++k) {
    subgroups_[k].offset = static_cast<int64_t>(k) * stride_;
    if (options_.swap_params) swap_params_bytes_ += subgroups_[k].slot_bytes;
    swap_params16_bytes_ += subgroups_[k].slot16_bytes;
  }
  swap_bytes_ = fp32_slots == 0 ? 0 : stride_ * static_cast<int64_t>(subgroups_.size());
}

// The partitions' values go to the swap file; their memory is released (the file is where they live now).
void SwappedOptimizer::write_initial_params() {
  auto* scratch = static_cast<char*>(buffers_.front().memory->data());
  for (SubGroup& s : subgroups_) {
    const torch::Tensor full = groups_[s.group].params[0].contiguous();
    std::memcpy(scratch, full.data_ptr<float>() + s.begin, static_cast<std::size_t>(s.numel) * 4);
    if (options_.swap_params16) {
      const torch::Tensor full16 = groups_[s.group].params16[0].contiguous();
      const std::size_t e = full16.element_size();
      std::memcpy(scratch + s.slot_bytes, static_cast<const char*>(full16.data_ptr()) + s.begin * e, s.numel * e);
    }
    file_->wait(file_->submit_write(scratch, lead_bytes(s), s.offset));
    s.on_disk = true;
  }
  for (const ParamGroup& g : groups_) {
    release_storage(g.params[0]);
    if (options_.swap_params16) release_storage(g.params16[0]);
  }
}

SwappedOptimizer::~SwappedOptimizer() {
  if (steps_ > 0) std::cerr << io_summary() << std::endl;
  file_.reset();  // waits for anything in flight
  std::error_code ec;
  if (!options_.swap_dir.empty()) fs::remove_all(options_.swap_dir, ec);
}

std::string SwappedOptimizer::kernel_description() const {
  const std::string inner = subgroups_.empty() ? "op-by-op" : subgroups_.front().optimizer->kernel_description();
  return inner + (options_.swap_params16 ? "; fp32 and 16-bit parameters and state in "
                                 : options_.swap_params ? "; fp32 parameters and state in " : "; state in ") + std::to_string(subgroups_.size()) + " sub-groups swapped to '" +
         (file_ ? file_->path() : std::string("-")) + "' (" +
         (file_ && file_->direct() ? "direct I/O" : "buffered I/O: the filesystem refuses O_DIRECT") + ", " +
         std::to_string(options_.buffer_count) + " buffers of " + std::to_string(stride_) + " bytes)";
}

int64_t SwappedOptimizer::state_bytes_in_memory() const { return stride_ * static_cast<int64_t>(buffers_.size()); }

std::vector<torch::Tensor> SwappedOptimizer::swapped_tensors(SubGroup& s) const {
  std::vector<torch::Tensor> out;
  const auto state = s.optimizer->state();
  for (const auto& key : s.slot_keys) out.push_back(state.at(key));
  return out;
}

void SwappedOptimizer::refresh_views(SubGroup& s) {
  const torch::Tensor& full = groups_[s.group].params[0];
  if (full.grad().defined()) s.view.mutable_grad() = full.grad().narrow(0, s.begin, s.numel);
  else s.view.mutable_grad() = torch::Tensor();
}

int SwappedOptimizer::buffer_of(int k) const {
  for (std::size_t i = 0; i < buffers_.size(); ++i)
    if (buffers_[i].holder == k) return static_cast<int>(i);
  return -1;
}

void SwappedOptimizer::wait(Buffer& b) {
  if (!b.pending) return;
  const auto t0 = std::chrono::steady_clock::now();
  const AioFile::Ticket t = b.pending;
  b.pending = 0;
  file_->wait(t);
  io_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (b.writing) {
    b.writing = false;
    b.holder = -1;
  }
}

int SwappedOptimizer::acquire_buffer(int for_subgroup) {
  for (std::size_t i = 0; i < buffers_.size(); ++i)
    if (buffers_[i].holder < 0 && !buffers_[i].pending) {
      buffers_[i].holder = for_subgroup;
      return static_cast<int>(i);
    }
  // The oldest write back: wait for it.
  int oldest = -1;
  for (std::size_t i = 0; i < buffers_.size(); ++i)
    if (buffers_[i].writing && (oldest < 0 || buffers_[i].holder < buffers_[oldest].holder)) oldest = static_cast<int>(i);
  if (oldest < 0) return -1;
  wait(buffers_[oldest]);
  buffers_[oldest].holder = for_subgroup;
  return oldest;
}

void SwappedOptimizer::start_read(int k) {
  const int b = acquire_buffer(k);
  if (b < 0) return;
  SubGroup& s = subgroups_[k];
  const int64_t bytes = region_bytes(s);
  const auto t0 = std::chrono::steady_clock::now();  // io_submit can block too: that time counts as waiting
  buffers_[b].pending = file_->submit_read(buffers_[b].memory->data(), bytes, s.offset);
  io_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  io_.read_bytes += bytes;
}

void SwappedOptimizer::bind(int k, Buffer& b) {
  SubGroup& s = subgroups_[k];
  auto* base = static_cast<char*>(b.memory->data());
  if (options_.swap_params) borrow_storage(s.view, base);
  if (options_.swap_params16) borrow_storage(s.view16, base + s.slot_bytes);
  std::vector<torch::Tensor> tensors = swapped_tensors(s);
  for (std::size_t i = 0; i < tensors.size(); ++i)
    tensors[i].set_(torch::from_blob(base + state_offset(s, i), {s.numel}, torch::kFloat32));
}

void SwappedOptimizer::release(int k) {
  if (options_.swap_params) release_storage(subgroups_[k].view);
  if (options_.swap_params16) release_storage(subgroups_[k].view16);
  for (auto& t : swapped_tensors(subgroups_[k])) t.set_();
}

void SwappedOptimizer::write_back(int k, Buffer& b) {
  SubGroup& s = subgroups_[k];
  const int64_t bytes = region_bytes(s);
  const auto t0 = std::chrono::steady_clock::now();
  b.pending = file_->submit_write(b.memory->data(), bytes, s.offset);
  io_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  b.writing = true;
  io_.written_bytes += bytes;
  s.on_disk = true;
}

// Copies the freshly created state of sub-group k into a buffer and binds it there.
void SwappedOptimizer::adopt_new_state(int k, Buffer& b) {
  SubGroup& s = subgroups_[k];
  const auto state = s.optimizer->state();
  s.slot_keys.clear();
  for (const auto& [key, t] : state)
    if (is_swapped_slot(key, t, s.numel)) s.slot_keys.push_back(key);
  if (region_bytes(s) > stride_)
    throw RuntimeFailure("offload: the optimizer keeps " + std::to_string(s.slot_keys.size()) +
                         " state tensors per element, more than the swap file reserved");
  auto* base = static_cast<char*>(b.memory->data());
  for (std::size_t i = 0; i < s.slot_keys.size(); ++i)
    std::memcpy(base + state_offset(s, i), state.at(s.slot_keys[i]).data_ptr<float>(), static_cast<std::size_t>(s.numel) * 4);
  bind(k, b);
}

void SwappedOptimizer::step(double lr, const StepScaling& scaling) {
  io_ = StepIo{};
  const auto started = std::chrono::steady_clock::now();
  const int n = static_cast<int>(subgroups_.size());
  for (int k = 0; k < n; ++k) {
    SubGroup& s = subgroups_[k];
    refresh_views(s);
    if (s.on_disk && buffer_of(k) < 0) start_read(k);
    if (k + 1 < n && subgroups_[k + 1].on_disk && buffer_of(k + 1) < 0) start_read(k + 1);  // prefetch
    int b = buffer_of(k);
    if (s.on_disk) {
      if (b < 0) throw RuntimeFailure("offload: no buffer for sub-group " + std::to_string(k));
      wait(buffers_[b]);
      bind(k, buffers_[b]);
    }
    s.optimizer->step(lr, scaling);
    if (s.slot_keys.empty() && has_swapped_state(*s.optimizer, s.numel)) {  // this step created its state
      if (b < 0) b = acquire_buffer(k);
      if (b < 0) throw RuntimeFailure("offload: no free buffer for sub-group " + std::to_string(k));
      adopt_new_state(k, buffers_[b]);
    }
    if (b < 0) continue;  // nothing in the file and no state: nothing stepped (no gradient), or stateless
    write_back(k, buffers_[b]);
    release(k);
  }
  for (auto& b : buffers_) wait(b);  // the swap file is complete when the step returns
  total_step_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  total_io_.read_bytes += io_.read_bytes;
  total_io_.written_bytes += io_.written_bytes;
  total_io_.wait_seconds += io_.wait_seconds;
  ++steps_;
}

std::string SwappedOptimizer::io_summary() const {
  char buf[320];
  const double moved = static_cast<double>(total_io_.read_bytes + total_io_.written_bytes);
  std::snprintf(buf, sizeof buf,
                "offload: %lld optimizer steps moved %.1f MB (read %.1f, written %.1f) in %.3f s of steps (%.0f MB/s); "
                "%.3f s (%.1f%%) of it waiting for I/O",
                static_cast<long long>(steps_), moved / 1e6, total_io_.read_bytes / 1e6, total_io_.written_bytes / 1e6,
                total_step_seconds_, total_step_seconds_ > 0 ? moved / 1e6 / total_step_seconds_ : 0.0,
                total_io_.wait_seconds, total_step_seconds_ > 0 ? 100.0 * total_io_.wait_seconds / total_step_seconds_ : 0.0);
  return buf;
}

std::map<std::string, torch::Tensor> SwappedOptimizer::state() const {
  std::map<std::string, torch::Tensor> out;
  AlignedBuffer scratch(stride_);
  for (std::size_t k = 0; k < subgroups_.size(); ++k) {
    const SubGroup& s = subgroups_[k];
    const int64_t partition = groups_[s.group].params[0].numel();
    for (const auto& [key, t] : s.optimizer->state())  // step counters (the same for every sub-group)
      if (std::find(s.slot_keys.begin(), s.slot_keys.end(), key) == s.slot_keys.end()) out.emplace(key, t.clone());
    if (!s.on_disk || s.slot_keys.empty()) continue;
    file_->wait(file_->submit_read(scratch.data(), region_bytes(s), s.offset));
    auto* base = static_cast<char*>(scratch.data());
    for (std::size_t i = 0; i < s.slot_keys.size(); ++i) {
      auto it = out.find(s.slot_keys[i]);
      if (it == out.end()) it = out.emplace(s.slot_keys[i], torch::zeros({partition})).first;
      std::memcpy(it->second.data_ptr<float>() + s.begin, base + state_offset(s, i), static_cast<std::size_t>(s.numel) * 4);
    }
  }
  return out;
}

void SwappedOptimizer::load_state(const std::map<std::string, torch::Tensor>& state) {
  for (std::size_t k = 0; k < subgroups_.size(); ++k) {
    SubGroup& s = subgroups_[k];
    const ParamGroup& group = groups_[s.group];
    const int64_t partition = group.params[0].numel();
    std::map<std::string, torch::Tensor> mine;
    for (const auto& [key, t] : state) {
      if (key.rfind(group.names[0] + ".", 0) != 0) continue;
      mine[key] = t.numel() == partition && partition > 1 ? t.narrow(0, s.begin, s.numel).clone() : t;
    }
    s.optimizer->load_state(mine);
    s.slot_keys.clear();
    s.on_disk = options_.swap_params;  // the parameter slice stays; the state is written anew
    if (!has_swapped_state(*s.optimizer, s.numel)) continue;
    const int b = acquire_buffer(static_cast<int>(k));
    if (options_.swap_params)  // the slice is written back with the state: bring it into the buffer first
      file_->wait(file_->submit_read(buffers_[b].memory->data(), lead_bytes(s), s.offset));
    adopt_new_state(static_cast<int>(k), buffers_[b]);
    write_back(static_cast<int>(k), buffers_[b]);
    release(static_cast<int>(k));
  }
  for (auto& b : buffers_) wait(b);
}

std::vector<std::size_t> SwappedOptimizer::subgroups_of(const std::string& group_name) const {
  if (!options_.swap_params) throw RuntimeFailure("offload: the parameters are not in the swap file");
  std::vector<std::size_t> out;
  for (std::size_t k = 0; k < subgroups_.size(); ++k)
    if (groups_[subgroups_[k].group].names[0] == group_name) out.push_back(k);
  if (out.empty()) throw RuntimeFailure("offload: no swapped partition named '" + group_name + "'");
  return out;
}

torch::Tensor SwappedOptimizer::read_params(const std::string& group_name, int64_t begin, int64_t count) const {
  return read_slices(group_name, false, begin, count);
}

torch::Tensor SwappedOptimizer::read_params16(const std::string& group_name) const {
  if (!options_.swap_params16) throw RuntimeFailure("offload: the 16-bit parameters are not in the swap file");
  return read_slices(group_name, true, 0, -1);
}

void SwappedOptimizer::write_params(const std::string& group_name, const torch::Tensor& values) {
  write_slices(group_name, false, values);
}

void SwappedOptimizer::write_params16(const std::string& group_name, const torch::Tensor& values) {
  if (!options_.swap_params16) throw RuntimeFailure("offload: the 16-bit parameters are not in the swap file");
  write_slices(group_name, true, values);
}

// The fp32 (sixteen false) or 16-bit parameter slices of a group's sub-groups that overlap [begin, begin+count).
torch::Tensor SwappedOptimizer::read_slices(const std::string& group_name, bool sixteen, int64_t begin, int64_t count) const {
  const auto mine = subgroups_of(group_name);
  const int64_t partition = groups_[subgroups_[mine.front()].group].params[0].numel();
  if (count < 0) count = partition - begin;
  if (begin < 0 || begin + count > partition)
    throw RuntimeFailure("offload: elements " + std::to_string(begin) + "+" + std::to_string(count) + " are outside '" +
                         group_name + "' (" + std::to_string(partition) + " elements)");
  auto out = torch::empty({count}, sixteen ? dtype16_ : torch::kFloat32);
  const std::size_t e = out.element_size();
  AlignedBuffer scratch(subgroups_[mine.front()].slot_bytes);
  for (std::size_t k : mine) {  // each overlapping slice read whole
    const SubGroup& s = subgroups_[k];
    const int64_t lo = std::max(begin, s.begin), hi = std::min(begin + count, s.begin + s.numel);
    if (lo >= hi) continue;
    file_->wait(file_->submit_read(scratch.data(), sixteen ? s.slot16_bytes : s.slot_bytes, s.offset + (sixteen ? s.slot_bytes : 0)));
    std::memcpy(static_cast<char*>(out.data_ptr()) + (lo - begin) * e, static_cast<const char*>(scratch.data()) + (lo - s.begin) * e,
                static_cast<std::size_t>(hi - lo) * e);
  }
  return out;
}

void SwappedOptimizer::write_slices(const std::string& group_name, bool sixteen, const torch::Tensor& values) {
  const auto mine = subgroups_of(group_name);
  const int64_t partition = groups_[subgroups_[mine.front()].group].params[0].numel();
  const torch::ScalarType dtype = sixteen ? dtype16_ : torch::kFloat32;
  if (values.numel() != partition || values.scalar_type() != dtype)
    throw RuntimeFailure("offload: '" + group_name + "' takes " + std::to_string(partition) + " values, got " +
                         std::to_string(values.numel()));
  const torch::Tensor flat = values.contiguous();
  const std::size_t e = flat.element_size();
  AlignedBuffer scratch(subgroups_[mine.front()].slot_bytes);
  for (std::size_t k : mine) {
    SubGroup& s = subgroups_[k];
    std::memcpy(scratch.data(), static_cast<const char*>(flat.data_ptr()) + s.begin * e, static_cast<std::size_t>(s.numel) * e);
    file_->wait(file_->submit_write(scratch.data(), sixteen ? s.slot16_bytes : s.slot_bytes, s.offset + (sixteen ? s.slot_bytes : 0)));
    s.on_disk = true;
  }
}

}  // namespace hftrain
