// The ways updated parameters are shared (see parameter_publisher.h).
#include "engine/parameter_publisher.h"

#include <string>

namespace hftrain {
namespace {

class NothingToPublish : public ParameterPublisher {
 public:
  void publish() override {}
};

class AllGatherPartitions : public ParameterPublisher {
 public:
  AllGatherPartitions(Comm& comm, std::vector<torch::Tensor> own, std::vector<torch::Tensor> full)
      : comm_(comm), own_(std::move(own)), full_(std::move(full)) {}
  void publish() override {
    for (std::size_t g = 0; g < full_.size(); ++g)
      if (full_[g].numel() > 0) comm_.all_gather(own_[g], full_[g], "parameters of group " + std::to_string(g));
  }

 private:
  Comm& comm_;
  std::vector<torch::Tensor> own_, full_;
};

class RefreshPersistent : public ParameterPublisher {
 public:
  explicit RefreshPersistent(ParamCoordinator& coordinator) : coordinator_(coordinator) {}
  void publish() override { coordinator_.refresh_persistent(); }

 private:
  ParamCoordinator& coordinator_;
};

}  // namespace

std::unique_ptr<ParameterPublisher> publish_nothing() { return std::make_unique<NothingToPublish>(); }

std::unique_ptr<ParameterPublisher> all_gather_partitions(Comm& comm, std::vector<torch::Tensor> own,
                                                          std::vector<torch::Tensor> full) {
  return std::make_unique<AllGatherPartitions>(comm, std::move(own), std::move(full));
}

std::unique_ptr<ParameterPublisher> refresh_persistent(ParamCoordinator& coordinator) {
  return std::make_unique<RefreshPersistent>(coordinator);
}

}  // namespace hftrain
