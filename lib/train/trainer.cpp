// The training loop (see trainer.h).
#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "checkpoint/model_io.h"
#include "checkpoint/safetensors.h"
#include "data/loader.h"
#include "train/evaluation.h"
#include "util/fs.h"

namespace hftrain {

double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  std::vector<torch::Tensor> norms;
  for (const auto& p : params)
    if (p.grad().defined()) norms.push_back(torch::linalg::vector_norm(p.grad().detach(), 2, c10::nullopt, false, c10::nullopt));
  if (norms.empty()) return 0.0;
  auto total = torch::linalg::vector_norm(torch::stack(norms), 2, c10::nullopt, false, c10::nullopt);
  if (max_norm > 0) {
    // Same rounding as torch 1.13: reciprocal first, then scale.
    auto coef = torch::clamp((total + 1e-6).reciprocal() * max_norm, c10::nullopt, 1.0);
    for (const auto& p : params)
      if (p.grad().defined()) p.grad().detach().mul_(coef);
  }
  return total.item<double>();
}

Trainer::Trainer(const RunSpec& spec, const Components& components, Pipeline& pipeline)
    : spec_(spec), components_(components), pipeline_(pipeline) {}

void Trainer::log(nlohmann::json entry) {
  entry["epoch"] = state_.epoch;
  entry["step"] = state_.global_step;
  std::cout << entry.dump() << std::endl;
  state_.log_history.push_back(std::move(entry));
}

void Trainer::log_training(double tr_loss, double grad_norm, double lr) {
  const auto steps = static_cast<double>(state_.global_step - last_logged_step_);
  log({{"loss", std::round(tr_loss / steps * 1e4) / 1e4}, {"grad_norm", grad_norm}, {"learning_rate", lr}});
  last_logged_step_ = state_.global_step;
}

void Trainer::run_evaluation() {
  log(evaluate(pipeline_, components_, "eval", spec_.training.per_device_eval_batch_size, "eval"));
}

void Trainer::save_checkpoint() {
  namespace fs = std::filesystem;
  const std::string name = "checkpoint-" + std::to_string(state_.global_step);
  const fs::path final_dir = fs::path(spec_.training.output_dir) / name;
  const fs::path tmp_dir = fs::path(spec_.training.output_dir) / ("." + name + ".partial");
  fs::remove_all(tmp_dir);
  save_model_dir(tmp_dir.string(), *pipeline_.model);
  NamedTensors optim;
  for (const auto& [k, v] : optimizer_->state()) optim.emplace_back(k, v);
  save_safetensors((tmp_dir / "optimizer.safetensors").string(), optim);
  save_safetensors((tmp_dir / "rng_state.safetensors").string(),
                   {{"cpu", at::detail::getDefaultCPUGenerator().get_state()}});
  write_file_atomic((tmp_dir / "trainer_state.json").string(), state_.to_json_text());
  fsync_directory(tmp_dir.string());
  fs::remove_all(final_dir);
  fs::rename(tmp_dir, final_dir);
  fsync_directory(spec_.training.output_dir);
}

nlohmann::json Trainer::train() {
  const TrainingArgs& args = spec_.training;
  Model& model = *pipeline_.model;
  DataLoader loader(pipeline_.data->split("train"), pipeline_.data->task(), args.per_device_train_batch_size,
                    /*shuffle=*/true, args.data_seed >= 0 ? args.data_seed : args.seed, args.dataloader_drop_last);
  const int64_t ga = args.gradient_accumulation_steps;
  const int64_t len_dl = loader.batches_per_epoch();
  if (len_dl == 0) throw RuntimeFailure("the training split yields no batches (too few examples for the batch size)");
  const int64_t updates_per_epoch = std::max<int64_t>(len_dl / ga + (len_dl % ga > 0 ? 1 : 0), 1);
  const int64_t max_steps = args.max_steps > 0
                                ? args.max_steps
                                : static_cast<int64_t>(std::ceil(args.num_train_epochs * static_cast<double>(updates_per_epoch)));
  const int64_t num_epochs = args.max_steps > 0 ? max_steps / updates_per_epoch + (max_steps % updates_per_epoch > 0)
                                                : static_cast<int64_t>(std::ceil(args.num_train_epochs));
  FlowControl flow(args, max_steps);
  state_.max_steps = max_steps;
  state_.num_train_epochs = num_epochs;
  state_.logging_steps = flow.logging_steps();
  state_.eval_steps = flow.eval_steps();
  state_.save_steps = flow.save_steps();
  state_.train_batch_size = args.per_device_train_batch_size;

  std::vector<std::pair<std::string, torch::Tensor>> named;
  std::vector<torch::Tensor> params;
  for (auto& np : model.named_parameters()) {
    named.emplace_back(np.key(), np.value());
    params.push_back(np.value());
  }
  optimizer_ = components_.optimizers.build(spec_.optimizer.type, spec_.optimizer.options,
                                            make_param_groups(named, args.weight_decay),
                                            OptimizerHyper{args.adam_beta1, args.adam_beta2, args.adam_epsilon});
  schedule_ = components_.schedulers.build(
      spec_.scheduler.type, spec_.scheduler.options,
      ScheduleContext{args.learning_rate, warmup_steps_for(args.warmup_steps, args.warmup_ratio, max_steps), max_steps});

  const auto start = std::chrono::steady_clock::now();
  model.train();
  double tr_loss = 0, total_loss = 0, grad_norm = 0;
  bool stop = false;
  for (int64_t epoch = 0; epoch < num_epochs && !stop; ++epoch) {
    loader.start_epoch(epoch);
    const int64_t windows = len_dl / ga + (len_dl % ga > 0 ? 1 : 0);
    const int64_t last_window = len_dl % ga == 0 ? ga : len_dl % ga;
    int64_t micro_step = 0;
    for (int64_t w = 0; w < windows && !stop; ++w) {
      const int64_t window = w + 1 == windows ? last_window : ga;
      double step_loss = 0;
      for (int64_t m = 0; m < window; ++m) {
        Batch batch;
        loader.next(batch);
        auto loss = model.forward(batch).loss / static_cast<double>(window);
        loss.backward();
        double l = loss.item<double>();
        if (args.logging_nan_inf_filter && !std::isfinite(l))
          l = tr_loss / static_cast<double>(1 + state_.global_step - last_logged_step_);
        step_loss += l;
        ++micro_step;
      }
      grad_norm = clip_grad_norm(params, args.max_grad_norm);
      optimizer_->step(schedule_->lr(state_.global_step));
      for (auto& p : params) p.mutable_grad() = torch::Tensor();
      state_.global_step += 1;
      state_.epoch = static_cast<double>(epoch) + static_cast<double>(micro_step) / static_cast<double>(len_dl);
      tr_loss += step_loss;
      total_loss += step_loss;

      FlowDecision d = flow.on_step_end(state_.global_step);
      if (w + 1 == windows) {
        FlowDecision e = flow.on_epoch_end(state_.epoch);
        d.should_log |= e.should_log;
        d.should_evaluate |= e.should_evaluate;
        d.should_save |= e.should_save;
      }
      if (d.should_log && state_.global_step > last_logged_step_) {
        log_training(tr_loss, grad_norm, schedule_->lr(state_.global_step));
        tr_loss = 0;
      }
      if (d.should_evaluate) run_evaluation();
      if (d.should_save) save_checkpoint();
      stop = d.should_training_stop;
    }
  }
  const double runtime = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double samples = static_cast<double>(max_steps * args.per_device_train_batch_size * ga);
  nlohmann::json metrics = {{"train_runtime", std::round(runtime * 1e4) / 1e4},
                            {"train_samples_per_second", std::round(samples / runtime * 1e3) / 1e3},
                            {"train_steps_per_second", std::round(static_cast<double>(max_steps) / runtime * 1e3) / 1e3},
                            {"total_flos", state_.total_flos},
                            {"train_loss", total_loss / static_cast<double>(std::max<int64_t>(1, state_.global_step))}};
  log(metrics);
  metrics["epoch"] = state_.epoch;
  return metrics;
}

}  // namespace hftrain
