// Meta-device and on-device construction of model families (see construction.h).
#include "models/construction.h"

#include <mutex>

namespace hftrain {
namespace {

thread_local bool meta_construction_active = false;
thread_local c10::optional<torch::Device> construction_device;  // DeviceConstruction

// A parameter built on the host, on the construction device (the same values and requires_grad).
torch::Tensor on_construction_device(const torch::Tensor& t) {
  if (!t.defined() || !construction_device) return t;
  return t.detach().to(*construction_device).set_requires_grad(t.requires_grad());
}

torch::Tensor meta_parameter(at::IntArrayRef shape) {
  return torch::empty(shape, torch::TensorOptions().device(torch::kMeta)).set_requires_grad(true);
}

// Each layer is first built at size 1 (its constructor always allocates and initialises), then its
// parameters are swapped for meta tensors of the real shape and its options set to the real ones.

struct MetaEmbedding : torch::nn::EmbeddingImpl {
  explicit MetaEmbedding(const torch::nn::EmbeddingOptions& real) : EmbeddingImpl(torch::nn::EmbeddingOptions(1, 1)) {
    options = real;
    weight = parameters_["weight"] = meta_parameter({real.num_embeddings(), real.embedding_dim()});
  }
};

struct MetaLayerNorm : torch::nn::LayerNormImpl {
  explicit MetaLayerNorm(const torch::nn::LayerNormOptions& real)
      : LayerNormImpl(torch::nn::LayerNormOptions(std::vector<int64_t>{1}).eps(real.eps()).elementwise_affine(real.elementwise_affine())) {
    options = real;
    if (real.elementwise_affine()) {
      weight = parameters_["weight"] = meta_parameter(real.normalized_shape());
      bias = parameters_["bias"] = meta_parameter(real.normalized_shape());
    }
  }
};

// torch's layers as their constructors build them, then their parameters (and the members that name
// them) swapped for copies on the construction device.
struct DeviceEmbedding : torch::nn::EmbeddingImpl {
  explicit DeviceEmbedding(const torch::nn::EmbeddingOptions& options) : EmbeddingImpl(options) {
    weight = parameters_["weight"] = on_construction_device(weight);
  }
};

struct DeviceLayerNorm : torch::nn::LayerNormImpl {
  explicit DeviceLayerNorm(const torch::nn::LayerNormOptions& options) : LayerNormImpl(options) {
    if (!options.elementwise_affine()) return;
    weight = parameters_["weight"] = on_construction_device(weight);
    bias = parameters_["bias"] = on_construction_device(bias);
  }
};

}  // namespace

DeviceConstruction::DeviceConstruction(torch::Device device) : previous_(construction_device) {
  construction_device = device;
}

DeviceConstruction::~DeviceConstruction() { construction_device = previous_; }

MetaConstruction::MetaConstruction()
    : previous_(meta_construction_active), generator_state_(at::detail::getDefaultCPUGenerator().get_state()) {
  meta_construction_active = true;
}

MetaConstruction::~MetaConstruction() {
  meta_construction_active = previous_;
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(generator_state_);
}

bool MetaConstruction::active() { return meta_construction_active; }

torch::TensorOptions parameter_options() {
  if (meta_construction_active) return torch::TensorOptions().device(torch::kMeta);
  return construction_device ? torch::TensorOptions().device(*construction_device) : torch::TensorOptions();
}

AdaptableLinear new_linear(int64_t in, int64_t out, bool bias) {
  using Layout = AdaptableLinearImpl::Layout;
  if (meta_construction_active)
    return AdaptableLinear(meta_parameter({out, in}), bias ? meta_parameter({out}) : torch::Tensor(), Layout::kOutIn);
  torch::nn::LinearImpl built(torch::nn::LinearOptions(in, out).bias(bias));  // torch's own draws, in its order
  return AdaptableLinear(on_construction_device(built.weight), bias ? on_construction_device(built.bias) : torch::Tensor(),
                         Layout::kOutIn);
}

torch::nn::Embedding new_embedding(int64_t count, int64_t dim) {
  const auto options = torch::nn::EmbeddingOptions(count, dim);
  if (construction_device && !meta_construction_active)
    return torch::nn::Embedding(std::shared_ptr<torch::nn::EmbeddingImpl>(std::make_shared<DeviceEmbedding>(options)));
  if (!meta_construction_active) return torch::nn::Embedding(options);
  return torch::nn::Embedding(std::shared_ptr<torch::nn::EmbeddingImpl>(std::make_shared<MetaEmbedding>(options)));
}

torch::nn::LayerNorm new_layer_norm(int64_t dim, double eps) {
  const auto options = torch::nn::LayerNormOptions({dim}).eps(eps);
  if (construction_device && !meta_construction_active)
    return torch::nn::LayerNorm(std::shared_ptr<torch::nn::LayerNormImpl>(std::make_shared<DeviceLayerNorm>(options)));
  if (!meta_construction_active) return torch::nn::LayerNorm(options);
  return torch::nn::LayerNorm(std::shared_ptr<torch::nn::LayerNormImpl>(std::make_shared<MetaLayerNorm>(options)));
}

std::vector<ParameterShape> parameter_shapes(const torch::nn::Module& module) {
  std::vector<ParameterShape> out;
  for (const auto& np : module.named_parameters()) out.push_back({np.key(), np.value().sizes().vec()});
  return out;
}

std::vector<ParameterShape> model_parameter_shapes(const Registry<Model, const ModelContext&>& models,
                                                   const std::string& type, const OptionsPtr& options,
                                                   const ModelContext& context) {
  MetaConstruction meta;
  return parameter_shapes(*models.build(type, options, context));
}

}  // namespace hftrain
