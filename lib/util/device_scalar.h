// A number that may still be on its device: a host double, or a one-element tensor read to the host only when
// value() is first asked for (then kept). On a GPU a read waits for every kernel queued before it, so a step's
// figures that are only logged now and then (the gradient norm) stay tensors until a logging step reads them.
#pragma once

#include <optional>

#include "util/torch_compat.h"

namespace hftrain {

class DeviceScalar {
 public:
  DeviceScalar() : host_(0.0) {}
  DeviceScalar(double host) : host_(host) {}  // NOLINT(google-explicit-constructor): a host number is one
  // `tensor`: one element of any floating dtype, on any device; undefined means 0.
  static DeviceScalar of(torch::Tensor tensor) {
    DeviceScalar s;
    if (tensor.defined()) {
      s.tensor_ = std::move(tensor);
      s.host_.reset();
    }
    return s;
  }

  // The value as a double (the tensor's element converted exactly); the first call on a device tensor waits
  // for the device.
  double value() const {
    if (!host_) host_ = tensor_.item<double>();
    return *host_;
  }
  // Whether value() would read from a device tensor that has not been read yet.
  bool pending() const { return !host_.has_value(); }

 private:
  torch::Tensor tensor_;
  mutable std::optional<double> host_;
};

}  // namespace hftrain
