// NVMe offload of optimizer state (DeepSpeed's offload_optimizer device nvme; ZeRO-Infinity). Wraps the
// optimizer a sharded engine steps: each flat group's partition is updated in sub-groups of at most
// `sub_group_size` elements, each by its own instance of the wrapped optimizer (same kernels, so the
// update is bitwise what the in-memory optimizer does), and each sub-group's state (Adam moments, Lion
// momentum, ...) lives in this rank's swap file between steps. A step streams the sub-groups through
// `buffer_count` aligned buffers: sub-group k+1 is read while k is updated and k-1 is written back
// (DeepSpeed's pipeline_read / pipeline_write). Step counters stay in memory. state() / load_state() give
// and take the usual full-partition tensors, so checkpoints are unchanged (read back from the swap file
// when saving; a resume writes the swap file anew). The swap directory is removed on destruction.
// With `swap_params` (mixed precision: the fp32 master weights) each group's flat partition moves into
// the swap file as well: it is written there at construction and its memory released; each sub-group's
// slice is read with its state, stepped in the buffer (the wrapped optimizer writes the 16-bit parameters
// in the same pass: fuses_low_precision() is required), and written back. read_params() / write_params()
// give the engine the partitions for checkpoints and loading. With `swap_params16` as well (ZeRO-3
// offload_param nvme: the 16-bit parameter shards), each sub-group's params16 slice is in the file too, bound
// to the same buffer during its update; read_params16() / write_params16() give the shards to gather.
// File layout: per sub-group [parameter slice if swapped][16-bit slice if swapped][state tensor 0][state
// tensor 1]..., each tensor at an aligned offset so that any one of them can be read or written alone.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "offload/aio_file.h"
#include "optim/optimizer.h"

namespace hftrain {

struct SwapOptions {
  std::string swap_dir;             // this rank's directory (created; removed on destruction)
  int64_t sub_group_size = 1000000000;  // elements per swapped sub-group (zero.sub_group_size)
  int buffer_count = 4;             // aligned buffers in the pipeline (>= 3)
  bool swap_params = false;         // the groups' partitions (fp32 masters) live in the swap file too
  bool swap_params16 = false;       // ... and their 16-bit copies (params16; ZeRO-3 offload_param nvme)
  // Asked for by the run (zero.offload_param nvme): the engine's ZeRO-3 parameter shards live in the swap
  // file; the engine turns it into swap_params (fp32: the shards are the masters) and swap_params16.
  bool parameter_shards = false;
  AioOptions aio;
};

class SwappedOptimizer : public Optimizer {
 public:
  using Factory = std::function<std::unique_ptr<Optimizer>(std::vector<ParamGroup>)>;
  // `groups`: one flat partition per group (params[0]), as the sharded engine builds them.
  SwappedOptimizer(std::vector<ParamGroup> groups, const Factory& build, SwapOptions options);
  ~SwappedOptimizer() override;

  void step(double lr, const StepScaling& scaling) override;
  bool fuses_low_precision() const override { return fuses_; }
  std::string kernel_description() const override;
  std::map<std::string, torch::Tensor> state() const override;
  void load_state(const std::map<std::string, torch::Tensor>& state) override;
  int64_t state_bytes_in_memory() const override;
  int64_t state_bytes_offloaded() const override { return swap_bytes_; }

  // Swapped parameters: `count` elements from `begin` (count -1: to the end) of the partition of the group
  // named `group_name` (its names[0]), read from the swap file; write_params stores `values` (the
  // partition's size) there.
  torch::Tensor read_params(const std::string& group_name, int64_t begin = 0, int64_t count = -1) const;
  void write_params(const std::string& group_name, const torch::Tensor& values);
  torch::Tensor read_params16(const std::string& group_name) const;
  void write_params16(const std::string& group_name, const torch::Tensor& values);
  int64_t params_bytes_offloaded() const { return swap_params_bytes_; }
  int64_t params16_bytes_offloaded() const { return swap_params16_bytes_; }

  const std::string& swap_file() const { return file_->path(); }
  bool direct_io() const { return file_->direct(); }
  // Bytes read and written by the last step, and the seconds it spent blocked on I/O (submitting or waiting).
  struct StepIo {
    int64_t read_bytes = 0, written_bytes = 0;
    double wait_seconds = 0;
  };
  const StepIo& last_step_io() const { return io_; }
  // "offload: 30 steps moved ..." for the end of the run: bytes, time in steps, time waiting for I/O.
  std::string io_summary() const;

 private:
  struct SubGroup {
    std::size_t group;           // index into groups_
    int64_t begin, numel;        // range of the group's partition
    torch::Tensor view;          // the range of the partition its optimizer steps (own storage when swapped)
    std::unique_ptr<Optimizer> optimizer;
    std::vector<std::string> slot_keys;  // its state tensors that are swapped, in file order
    int64_t offset = 0;          // in the swap file
    int64_t slot_bytes = 0;      // bytes of one of its fp32 tensors in the file (aligned)
    torch::Tensor view16;        // swap_params16: its 16-bit slice (own storage, bound during its update)
    int64_t slot16_bytes = 0;    // bytes of that slice in the file (aligned)
    bool on_disk = false;        // the swap file holds this sub-group's state
  };
  struct Buffer {
    std::unique_ptr<AlignedBuffer> memory;
    int holder = -1;             // sub-group whose state it holds, or -1
    AioFile::Ticket pending = 0;  // a read or write in flight, or 0
    bool writing = false;         // the request in flight is a write back (the buffer is free after it)
  };

  std::vector<torch::Tensor> swapped_tensors(SubGroup& s) const;  // its state tensors of numel elements
  // Bytes of its parameter slices at the start of its region; the offset of state tensor i in it; the region.
  int64_t lead_bytes(const SubGroup& s) const {
    return (options_.swap_params ? s.slot_bytes : 0) + (options_.swap_params16 ? s.slot16_bytes : 0);
  }
  int64_t state_offset(const SubGroup& s, std::size_t i) const { return lead_bytes(s) + static_cast<int64_t>(i) * s.slot_bytes; }
  int64_t region_bytes(const SubGroup& s) const { return state_offset(s, s.slot_keys.size()); }
  torch::Tensor read_slices(const std::string& group_name, bool sixteen, int64_t begin, int64_t count) const;
  void write_slices(const std::string& group_name, bool sixteen, const torch::Tensor& values);
  std::vector<std::size_t> subgroups_of(const std::string& group_name) const;
  int64_t add_subgroups(std::size_t g, const Factory& build);
  ParamGroup subgroup_params(SubGroup& s, const ParamGroup& group);
  void lay_out_swap_file(const Factory& build, int64_t largest);
  void write_initial_params();
  int buffer_of(int k) const;
  int acquire_buffer(int for_subgroup);
  void start_read(int k);
  void bind(int k, Buffer& b);
  void release(int k);
  void wait(Buffer& b);
  void write_back(int k, Buffer& b);
  void adopt_new_state(int k, Buffer& b);
  void refresh_views(SubGroup& s);

  std::vector<ParamGroup> groups_;
  std::vector<SubGroup> subgroups_;
  std::vector<Buffer> buffers_;
  SwapOptions options_;
  std::unique_ptr<AioFile> file_;
  int64_t stride_ = 0;       // bytes per sub-group in the swap file
  int64_t swap_bytes_ = 0;
  int64_t swap_params_bytes_ = 0;  // of swap_bytes_, the parameter slices
  int64_t swap_params16_bytes_ = 0;  // ... and the 16-bit ones
  torch::ScalarType dtype16_ = torch::kBFloat16;
  bool fuses_ = false;
  StepIo io_;
  StepIo total_io_;          // over every step
  double total_step_seconds_ = 0;
  int64_t steps_ = 0;
};

}  // namespace hftrain
