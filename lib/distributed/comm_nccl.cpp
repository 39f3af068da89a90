// The NCCL communicator (see comm_nccl.h). Everything NCCL is under HFTRAIN_WITH_CUDA (util/torch_compat.h).
#include "distributed/comm_nccl.h"

#include <cstdlib>

#include "distributed/env.h"
#include "distributed/rendezvous.h"
#include "util/error.h"
#include "util/torch_compat.h"

#if HFTRAIN_WITH_CUDA
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "distributed/comm_native.h"
#endif

namespace hftrain {

#if HFTRAIN_WITH_CUDA
namespace {
// The NCCL communicator shuts its group down when it goes, as torch.distributed.destroy_process_group does;
// LibTorch 2.x otherwise warns at exit that the group may leak resources. Backend::shutdown (public, virtual)
// was read in LibTorch 2.11's headers; older versions keep the warning.
class NcclComm final : public NativeCollectivesComm<c10d::ProcessGroupNCCL> {
 public:
  NcclComm(c10::intrusive_ptr<c10d::ProcessGroupNCCL> group, int rank, int size, torch::Device device,
           std::chrono::milliseconds timeout, std::shared_ptr<void> keep_alive, SubgroupMaker make_subgroup = nullptr)
      : NativeCollectivesComm(group, rank, size, device, timeout, "nccl", std::move(keep_alive), std::move(make_subgroup)),
        nccl_(std::move(group)) {}
  ~NcclComm() override {
#if HFTRAIN_TORCH_AT_LEAST(2, 11)
    try {
      static_cast<c10d::Backend&>(*nccl_).shutdown();
    } catch (...) {  // a destructor must not throw; the group is going away either way
    }
#endif
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl_;
};
}  // namespace
#endif

std::unique_ptr<Comm> make_nccl_comm(const DistEnv& env, const RendezvousOptions& options, int cuda_index) {
#if HFTRAIN_WITH_CUDA
  // Blocking wait (unless the user chose otherwise): wait() then holds the host until the collective is done and
  // enforces distributed.ddp_timeout, so a worker that went away surfaces as this rank's named error rather than a
  // hang (LibTorch 1.x reads NCCL_BLOCKING_WAIT, 2.x TORCH_NCCL_BLOCKING_WAIT). Collectives still overlap the work
  // issued between their launch and their wait.
  ::setenv("TORCH_NCCL_BLOCKING_WAIT", "1", /*overwrite=*/0);
  ::setenv("NCCL_BLOCKING_WAIT", "1", /*overwrite=*/0);
  auto met = std::make_shared<Rendezvous>(rendezvous(env, options));
  auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
  nccl_options->timeout = options.store_timeout;
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> group;
  try {
    group = c10::make_intrusive<c10d::ProcessGroupNCCL>(c10::make_intrusive<c10d::PrefixStore>("hftrain/world", met->store),
                                                        env.rank, env.world_size, nccl_options);
  } catch (const std::exception& e) {
    throw RuntimeFailure("rendezvous: rank " + std::to_string(env.rank) + " could not form the NCCL group of " +
                         std::to_string(env.world_size) + " workers on cuda:" + std::to_string(cuda_index) + ": " +
                         short_error(e));
  }
  const torch::Device device(torch::kCUDA, static_cast<c10::DeviceIndex>(cuda_index));
  const std::chrono::milliseconds timeout = options.store_timeout;
  // A group of ranks (sequence / expert parallelism): its own NCCL communicator, whose unique id the members trade
  // through the job's store under the group's name, as torch.distributed.new_group does.
  SubgroupMaker make_subgroup = [met, nccl_options, device, timeout](const std::vector<int>& ranks, int index,
                                                                      const std::string& name) -> std::unique_ptr<Comm> {
    const int size = static_cast<int>(ranks.size());
    auto members = c10::make_intrusive<c10d::ProcessGroupNCCL>(
        c10::make_intrusive<c10d::PrefixStore>("hftrain/group/" + name, met->store), index, size, nccl_options);
    return std::make_unique<NcclComm>(members, index, size, device, timeout, met);
  };
  return std::make_unique<NcclComm>(group, env.rank, env.world_size, device, timeout, met, std::move(make_subgroup));
#else
  (void)env;
  (void)options;
  (void)cuda_index;
  throw ConfigError("distributed.backend: nccl needs CUDA, and this build runs on the CPU; use gloo (or auto)");
#endif
}

}  // namespace hftrain
