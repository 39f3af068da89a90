// The memory-efficient optimizers beside parameters on a device: adamw_8bit and the GaLore optimizers keep their
// moments in host memory (the 8-bit codes are read through host pointers) and step parameters that live on the
// device, to the same values as on the host, through a state round trip too. The device is cuda:0 in a CUDA build
// with a GPU, otherwise torch's lazy tensor device (tests/unit/lazy_device.h), whose tensors hold no host memory.
#include <catch2/catch.hpp>

#include "lazy_device.h"
#include "optimizer_test_helpers.h"

using namespace hftrain;

namespace {

std::unique_ptr<Optimizer> make(const std::string& type, const std::string& yaml, std::vector<ParamGroup> groups) {
  OptimizerHyper hyper;
  hyper.low_rank_params = {"w"};
  return hftrain_test::make_optimizer(type, yaml, std::move(groups), hyper);
}

}  // namespace

TEST_CASE("device placement: adamw_8bit and GaLore step device parameters as on the host, moments in host memory",
          "[unit][device][optim]") {
  const torch::Device device = hftrain_test::gpu_or(hftrain_test::lazy_device());
  struct Case {
    std::string type, yaml;
  };
  for (const Case& c : std::vector<Case>{{"adamw_8bit", "{min_8bit_size: 0, block_size: 64}"},
                                         {"galore_adamw", "{rank: 3, update_proj_gap: 4, proj_type: full}"},
                                         {"galore_adamw_8bit", "{rank: 3, update_proj_gap: 4, min_8bit_size: 0, block_size: 16}"}}) {
    INFO(c.type << " on " << device.str());
    using hftrain_test::NamedParams;
    NamedParams host, dev(24, 10, 3, device), resumed(24, 10, 3, device);
    auto on_host = make(c.type, c.yaml, host.groups());
    auto on_device = make(c.type, c.yaml, dev.groups());
    for (int k = 0; k < 5; ++k) {
      host.set_grads(k), dev.set_grads(k);
      on_host->step(1e-2), on_device->step(1e-2);
    }
    CHECK(dev.w.device() == device);
    // A fresh optimizer over a copy of the device parameters resumes from the saved state (host tensors).
    std::map<std::string, torch::Tensor> saved;
    for (const auto& [name, t] : on_device->state()) {
      CHECK(t.device().is_cpu() == (name.find("galore_left") == std::string::npos &&
                                    name.find("galore_right") == std::string::npos));
      saved[name] = t.to(torch::kCPU);
    }
    {
      torch::NoGradGuard no_grad;
      resumed.w.copy_(dev.w);
      resumed.v.copy_(dev.v);
    }
    auto again = make(c.type, c.yaml, resumed.groups());
    again->load_state(saved);
    for (int k = 5; k < 9; ++k) {  // a projection refresh at step 8
      host.set_grads(k), dev.set_grads(k), resumed.set_grads(k);
      on_host->step(1e-2), on_device->step(1e-2), again->step(1e-2);
    }
    const auto w = dev.w.detach().to(torch::kCPU), v = dev.v.detach().to(torch::kCPU);
    CHECK((w - host.w.detach()).abs().max().item<double>() < 1e-5);
    CHECK((v - host.v.detach()).abs().max().item<double>() < 1e-5);
    CHECK(torch::equal(resumed.w.detach().to(torch::kCPU), w));
    CHECK(torch::equal(resumed.v.detach().to(torch::kCPU), v));
  }
}
