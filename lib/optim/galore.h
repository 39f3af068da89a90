// GaLore optimizers (Zhao et al. 2024, arXiv:2403.03507): `galore_adamw`, `galore_adamw_8bit`,
// `galore_adafactor`. The weights that training.optim_target_modules selects (OptimizerHyper::low_rank_params)
// are updated in a rank-r subspace: the gradient G is projected, R = proj(G) (optim/galore_projector.h),
// the inner optimizer's state lives in R's shape, and its normalised update N comes back as
// scale * back(N), Algorithm 2 of the paper:
//   galore_adamw(_8bit): p *= 1 - lr wd;  p -= lr / (1 - b1^t) * scale * back(m / (sqrt(v)/sqrt(1 - b2^t) + eps))
//                        (m, v the Adam moments of R, float32 or 8-bit: optim/adam_moments.h)
//   galore_adafactor:    p += -wd * lr * p;  p -= scale * back(adafactor_update(R))  (the update already
//                        includes the step size and the RMS clip, as for `adafactor`)
// Every other parameter takes the inner optimizer unchanged (adamw, adamw_8bit, adafactor). Options
// (HF optim_args): rank 128, update_proj_gap 200, scale 0.25, proj_type std (HF's defaults).
// A `_layerwise` form steps each parameter from inside backward (Optimizer::step_parameter).
#pragma once

#include <memory>
#include <set>

#include "config/schema.h"
#include "optim/adafactor.h"
#include "optim/adam_moments.h"
#include "optim/galore_projector.h"

namespace hftrain {

struct GaloreOptions {
  int64_t rank = 128;
  int64_t update_proj_gap = 200;
  double scale = 0.25;
  std::string proj_type = "std";
  GaloreSettings settings() const { return {rank, update_proj_gap, scale, proj_type}; }
};
template <class O>
void declare_galore_options(Schema<O>& s) {
  s.template add<int64_t>("rank", &O::rank, "GaLore: rank r of the projection (capped at the weight's smaller side).")
      .min(1);
  s.template add<int64_t>("update_proj_gap", &O::update_proj_gap,
                          "GaLore: steps between recomputations of the projection from the gradient's SVD.")
      .min(1);
  s.template add<double>("scale", &O::scale, "GaLore: factor on the projected-back update (alpha).").greater_than(0);
  s.template add<std::string>("proj_type", &O::proj_type,
                              "GaLore projection side: std (the smaller side), reverse_std, left, right, full.")
      .choices(galore_proj_types());
}

class GaloreBase : public Optimizer {
 public:
  using Optimizer::step;
  void step(double lr, const StepScaling& scaling) override;
  std::map<std::string, torch::Tensor> state() const override;
  void load_state(const std::map<std::string, torch::Tensor>& state) override;
  bool steps_in_backward() const override { return layerwise_; }
  std::vector<std::pair<std::string, torch::Tensor>> backward_parameters() const override;
  void step_parameter(const std::string& name, const torch::Tensor& grad, double lr) override;

 protected:
  // `type` names the optimizer in errors. Throws ConfigError when no parameter is targeted, or a targeted one is
  // not 2-D.
  GaloreBase(const GaloreSettings& settings, std::vector<ParamGroup> groups, const OptimizerHyper& hyper,
             const std::string& type);
  // One update of `param` with fp32 gradient `grad`; `projector` is null for a parameter that is not targeted.
  virtual void update(const std::string& name, torch::Tensor& param, const torch::Tensor& grad,
                      GaloreProjector* projector, double lr, double weight_decay) = 0;
  virtual void save_inner(std::map<std::string, torch::Tensor>& out) const = 0;
  // Restores the inner state of `name` whose (projected) shape is `shape`.
  virtual void load_inner(const std::string& name, const std::map<std::string, torch::Tensor>& state,
                          torch::IntArrayRef shape) = 0;
  virtual void clear_inner() = 0;
  const OptimizerHyper& hyper() const { return hyper_; }
  void set_layerwise() { layerwise_ = true; }

 private:
  void step_one(const std::string& name, torch::Tensor& param, const torch::Tensor& grad, double lr, double wd);
  bool layerwise_ = false;
  std::vector<ParamGroup> groups_;
  std::map<std::string, std::pair<torch::Tensor, double>> by_name_;  // parameter and its group's weight decay
  OptimizerHyper hyper_;
  std::map<std::string, GaloreProjector> fresh_;       // per targeted weight, before its first step
  std::map<std::string, GaloreProjector> projectors_;  // live ones
};

// galore_adamw and galore_adamw_8bit: Adam moments (fp32, or 8-bit with quantised = true).
class GaloreAdam : public GaloreBase {
 protected:
  GaloreAdam(const GaloreSettings& settings, std::vector<ParamGroup> groups, const OptimizerHyper& hyper,
             const std::string& type, bool quantized, int64_t block_size, int64_t min_8bit_size);
  void update(const std::string& name, torch::Tensor& param, const torch::Tensor& grad, GaloreProjector* projector,
              double lr, double weight_decay) override;
  void save_inner(std::map<std::string, torch::Tensor>& out) const override;
  void load_inner(const std::string& name, const std::map<std::string, torch::Tensor>& state,
                  torch::IntArrayRef shape) override;
  void clear_inner() override { moments_.clear(); }

 private:
  AdamMomentsConfig config_for(int64_t numel) const;
  bool quantized_;
  int64_t block_size_, min_8bit_size_;
  std::map<std::string, AdamMoments> moments_;
};

class GaloreAdamW : public GaloreAdam {
 public:
  struct Options : GaloreOptions {
    static void declare(Schema<Options>& s) { declare_galore_options(s); }
  };
  GaloreAdamW(const Options& o, std::vector<ParamGroup> groups, const OptimizerHyper& hyper)
      : GaloreAdam(o.settings(), std::move(groups), hyper, "galore_adamw", false, 0, 0) {}
};

class GaloreAdamW8bit : public GaloreAdam {
 public:
  struct Options : GaloreOptions {
    int64_t block_size = 2048;
    int64_t min_8bit_size = 4096;
    static void declare(Schema<Options>& s);
  };
  GaloreAdamW8bit(const Options& o, std::vector<ParamGroup> groups, const OptimizerHyper& hyper)
      : GaloreAdam(o.settings(), std::move(groups), hyper, "galore_adamw_8bit", true, o.block_size, o.min_8bit_size) {}
};

class GaloreAdafactor : public GaloreBase {
 public:
  struct Options : GaloreOptions, AdafactorOptions {
    static void declare(Schema<Options>& s) {
      declare_galore_options(s);
      declare_adafactor_options(s);
    }
  };
  GaloreAdafactor(const Options& o, std::vector<ParamGroup> groups, const OptimizerHyper& hyper);

 protected:
  void update(const std::string& name, torch::Tensor& param, const torch::Tensor& grad, GaloreProjector* projector,
              double lr, double weight_decay) override;
  void save_inner(std::map<std::string, torch::Tensor>& out) const override;
  void load_inner(const std::string& name, const std::map<std::string, torch::Tensor>& state,
                  torch::IntArrayRef shape) override;
  void clear_inner() override { slots_.clear(); }

 private:
  AdafactorOptions options_;
  std::map<std::string, AdafactorState> slots_;
};

// The `_layerwise` forms: the same update, run per parameter inside backward (HF's galore_*_layerwise).
template <class Base>
class Layerwise : public Base {
 public:
  static constexpr OptimizerTraits kTraits{/*element_wise=*/false, /*steps_in_backward=*/true};
  using Options = typename Base::Options;
  Layerwise(const Options& o, std::vector<ParamGroup> groups, const OptimizerHyper& hyper)
      : Base(o, std::move(groups), hyper) {
    this->set_layerwise();
  }
};
using GaloreAdamWLayerwise = Layerwise<GaloreAdamW>;
using GaloreAdamW8bitLayerwise = Layerwise<GaloreAdamW8bit>;
using GaloreAdafactorLayerwise = Layerwise<GaloreAdafactor>;

}  // namespace hftrain
