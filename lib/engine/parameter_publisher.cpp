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
  AllGatherPartitions(std::vector<Comm*> comms, std::vector<torch::Tensor> own, std::vector<torch::Tensor> full)
      : comms_(std::move(comms)), own_(std::move(own)), full_(std::move(full)) {}
  void publish() override {
    for (std::size_t g = 0; g < full_.size(); ++g)
      if (full_[g].numel() > 0) comms_[g]->all_gather(own_[g], full_[g], "parameters of group " + std::to_string(g));
  }

 private:
  std::vector<Comm*> comms_;
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

std::unique_ptr<ParameterPublisher> all_gather_partitions(std::vector<Comm*> comms, std::vector<torch::Tensor> own,
                                                          std::vector<torch::Tensor> full) {
  return std::make_unique<AllGatherPartitions>(std::move(comms), std::move(own), std::move(full));
}

std::unique_ptr<ParameterPublisher> refresh_persistent(ParamCoordinator& coordinator) {
  return std::make_unique<RefreshPersistent>(coordinator);
}

}  // namespace hftrain
