// Where a family's parameters are built. Normally in memory, initialised as torch and HF do; under a
// MetaConstruction scope on torch's meta device: the module tree (parameter names, shapes, order) exists
// with no storage and no initial values, so `hftrain estimate` reads a model of any size from the family's
// own constructor. Families build their parameter-holding layers and tensors through these functions.
#pragma once

#include <string>
#include <vector>

#include "models/adaptable_linear.h"
#include "models/model.h"
#include "registry/registry.h"
#include "util/torch_compat.h"

namespace hftrain {

// While one lives on this thread, the functions below build on the meta device and Model skips its
// initialisation passes. Torch's global generator is left as it was when the scope began.
class MetaConstruction {
 public:
  MetaConstruction();
  ~MetaConstruction();
  MetaConstruction(const MetaConstruction&) = delete;
  MetaConstruction& operator=(const MetaConstruction&) = delete;
  static bool active();

 private:
  bool previous_;
  torch::Tensor generator_state_;
};

// While one lives on this thread, the functions below build their tensors on `device` (torch's own layers
// draw their values on the host as their constructors do, then move), and the model's initialisation
// passes draw on the host too and copy there (the same seed gives the host build's values). It puts a model's tensors on a device that torch::nn::Module::to cannot move them to
// (Module::to replaces a parameter's data in place, which only works between dense devices such as the
// CPU and CUDA: not for torch's lazy tensor device, which the device tests use as a non-host device).
class DeviceConstruction {
 public:
  explicit DeviceConstruction(torch::Device device);
  ~DeviceConstruction();
  DeviceConstruction(const DeviceConstruction&) = delete;
  DeviceConstruction& operator=(const DeviceConstruction&) = delete;

 private:
  c10::optional<torch::Device> previous_;
};

// Options for a new parameter tensor: float32 on the meta device under MetaConstruction, on the device of
// a DeviceConstruction, else the default.
torch::TensorOptions parameter_options();

// torch::nn layers exactly as their constructors build them (the same random draws), or, under
// MetaConstruction, with meta parameters of the same names and shapes. Linear layers are
// AdaptableLinear (nn.Linear's names, values and layout; able to carry a LoRA adapter).
AdaptableLinear new_linear(int64_t in, int64_t out, bool bias = true);
torch::nn::Embedding new_embedding(int64_t count, int64_t dim);
torch::nn::LayerNorm new_layer_norm(int64_t dim, double eps);

// The parameters `module` registers, in named_parameters() order.
std::vector<ParameterShape> parameter_shapes(const torch::nn::Module& module);

// The parameters model `type` registers for these options (null = defaults), read from its own module
// tree built under MetaConstruction: no storage, no initialisation, for any model size.
std::vector<ParameterShape> model_parameter_shapes(const Registry<Model, const ModelContext&>& models,
                                                   const std::string& type, const OptionsPtr& options,
                                                   const ModelContext& context);

}  // namespace hftrain
