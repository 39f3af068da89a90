// TrainerState: HF's trainer_state.json contents (global_step, epoch, log_history, ...).
#pragma once

#include <nlohmann/json.hpp>

namespace hftrain {

struct TrainerState {
  int64_t global_step = 0;
  double epoch = 0;
  int64_t max_steps = 0;
  int64_t num_train_epochs = 0;
  int64_t logging_steps = 500, eval_steps = 500, save_steps = 500;
  int64_t train_batch_size = 0;
  double total_flos = 0;
  int64_t num_input_tokens_seen = 0;
  nlohmann::json log_history = nlohmann::json::array();
  nlohmann::json best_metric = nullptr;
  nlohmann::json best_global_step = nullptr;
  nlohmann::json best_model_checkpoint = nullptr;
  nlohmann::json stateful_callbacks = nlohmann::json::object();

  // HF layout: sorted keys, indent 2, trailing newline.
  std::string to_json_text() const;
  // Reads trainer_state.json written by to_json_text() (or by HF: fields it lacks keep their
  // defaults, fields this struct does not hold are ignored). Throws RuntimeFailure naming `source`.
  static TrainerState from_json_text(const std::string& text, const std::string& source);
};

}  // namespace hftrain
