// GaLore optimizers (see galore.h).
#include "optim/galore.h"

#include "optim/step_tensors.h"
#include "util/error.h"

namespace hftrain {

GaloreBase::GaloreBase(const GaloreSettings& settings, std::vector<ParamGroup> groups, const OptimizerHyper& hyper,
                       const std::string& type)
    : groups_(std::move(groups)), hyper_(hyper) {
  for (const auto& g : groups_) {
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      by_name_[g.names[i]] = {g.params[i], g.weight_decay};
      if (!hyper_.low_rank_params.count(g.names[i])) continue;
      if (g.params[i].dim() != 2)
        throw ConfigError("training.optim_target_modules: '" + g.names[i] + "' is not a 2-D weight; " + type +
                          " projects matrices only");
      fresh_.emplace(g.names[i], GaloreProjector(g.params[i].sizes(), settings));
    }
  }
  if (fresh_.empty())
    throw ConfigError("training.optim_target_modules: optimizer " + type +
                      " needs the weights to project; list their modules in training.optim_target_modules");
}

void GaloreBase::step_one(const std::string& name, torch::Tensor& param, const torch::Tensor& grad, double lr,
                          double wd) {
  GaloreProjector* projector = nullptr;
  if (auto f = fresh_.find(name); f != fresh_.end()) {
    auto it = projectors_.find(name);
    if (it == projectors_.end()) it = projectors_.emplace(name, f->second).first;
    projector = &it->second;
  }
  update(name, param, grad, projector, lr, wd);
}

void GaloreBase::step(double lr, const StepScaling& scaling) {
  torch::NoGradGuard no_grad;
  for (auto& group : groups_) {
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      auto& param = group.params[i];
      if (!param.grad().defined()) continue;
      step_one(group.names[i], param, fp32_gradient(param.grad(), scaling.grad_scale), lr, group.weight_decay);
    }
  }
}

std::vector<std::pair<std::string, torch::Tensor>> GaloreBase::backward_parameters() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& g : groups_)
    for (std::size_t i = 0; i < g.params.size(); ++i) out.emplace_back(g.names[i], g.params[i]);
  return out;
}

void GaloreBase::step_parameter(const std::string& name, const torch::Tensor& grad, double lr) {
  torch::NoGradGuard no_grad;
  auto& [param, wd] = by_name_.at(name);
  step_one(name, param, fp32_gradient(grad, 1.0), lr, wd);
}

std::map<std::string, torch::Tensor> GaloreBase::state() const {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, p] : projectors_) p.save(name, out);
  save_inner(out);
  return out;
}

void GaloreBase::load_state(const std::map<std::string, torch::Tensor>& state) {
  projectors_.clear();
  clear_inner();
  for (auto& group : groups_) {
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      const std::string& name = group.names[i];
      auto f = fresh_.find(name);
      if (f == fresh_.end()) {
        if (state.count(name + ".galore_step"))
          throw RuntimeFailure("optimizer state for '" + name +
                               "' holds a GaLore projection but the weight is not in training.optim_target_modules");
        load_inner(name, state, group.params[i].sizes());
        continue;
      }
      GaloreProjector p = f->second;
      if (p.load(name, state)) {
        projectors_.emplace(name, p);
        load_inner(name, state, p.low_rank_shape());
      } else if (state.count(name + ".step")) {
        throw RuntimeFailure("optimizer state for '" + name +
                             "' has no GaLore projection but the weight is in training.optim_target_modules");
      }
    }
  }
}

// ---- Adam inner ------------------------------------------------------------------------------------

GaloreAdam::GaloreAdam(const GaloreSettings& settings, std::vector<ParamGroup> groups, const OptimizerHyper& hyper,
                       const std::string& type, bool quantized, int64_t block_size, int64_t min_8bit_size)
    : GaloreBase(settings, std::move(groups), hyper, type),
      quantized_(quantized),
      block_size_(block_size),
      min_8bit_size_(min_8bit_size) {}

AdamMomentsConfig GaloreAdam::config_for(int64_t numel) const {
  AdamMomentsConfig c{hyper().beta1, hyper().beta2, hyper().eps};
  c.quantized = quantized_ && numel >= min_8bit_size_;
  c.block_size = block_size_ > 0 ? block_size_ : 2048;
  return c;
}

void GaloreAdam::update(const std::string& name, torch::Tensor& param, const torch::Tensor& grad,
                        GaloreProjector* projector, double lr, double weight_decay) {
  const torch::Tensor r = projector ? projector->project(grad) : grad;
  auto it = moments_.find(name);
  if (it == moments_.end()) it = moments_.emplace(name, AdamMoments(r.sizes(), config_for(r.numel()))).first;
  param.mul_(1 - lr * weight_decay);
  if (!projector) {
    it->second.update_param(param, r, lr);
    return;
  }
  const AdamMoments::Work w = it->second.update(r, lr);
  param.add_(projector->project_back(w.exp_avg / w.denom), -w.step_size);
}

void GaloreAdam::save_inner(std::map<std::string, torch::Tensor>& out) const {
  for (const auto& [name, m] : moments_) m.save(name, out);
}

void GaloreAdam::load_inner(const std::string& name, const std::map<std::string, torch::Tensor>& state,
                            torch::IntArrayRef shape) {
  AdamMoments m;
  if (m.load(name, state, shape, config_for(c10::multiply_integers(shape)))) moments_.emplace(name, std::move(m));
}

void GaloreAdamW8bit::Options::declare(Schema<Options>& s) {
  declare_galore_options(s);
  s.add("block_size", &Options::block_size, "Elements per quantisation block of the 8-bit moments.").min(16);
  s.add("min_8bit_size", &Options::min_8bit_size,
        "Moment tensors (projected shape for GaLore weights) with fewer elements stay float32.")
      .min(0);
}

// ---- Adafactor inner -------------------------------------------------------------------------------

GaloreAdafactor::GaloreAdafactor(const Options& o, std::vector<ParamGroup> groups, const OptimizerHyper& hyper)
    : GaloreBase(o.settings(), std::move(groups), hyper, "galore_adafactor"), options_(o) {
  if (options_.warmup_init && !options_.relative_step)
    throw ConfigError("optimizer.warmup_init: warmup_init: true requires relative_step: true");
}

void GaloreAdafactor::update(const std::string& name, torch::Tensor& param, const torch::Tensor& grad,
                             GaloreProjector* projector, double lr, double weight_decay) {
  const torch::Tensor r = projector ? projector->project(grad) : grad;
  const AdafactorUpdate u = adafactor_update(slots_[name], r, param, lr, options_);
  if (weight_decay != 0) param.add_(param, u.decay_alpha(weight_decay));
  param.add_(projector ? -projector->project_back(u.update) : -u.update);
}

void GaloreAdafactor::save_inner(std::map<std::string, torch::Tensor>& out) const {
  for (const auto& [name, s] : slots_) save_adafactor_state(name, s, out);
}

void GaloreAdafactor::load_inner(const std::string& name, const std::map<std::string, torch::Tensor>& state,
                                 torch::IntArrayRef shape) {
  AdafactorState s;
  if (load_adafactor_state(name, state, shape, options_, &s)) slots_[name] = s;
}

}  // namespace hftrain
