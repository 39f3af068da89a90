// trainer_state.json serialisation (see trainer_state.h).
#include "train/trainer_state.h"

namespace hftrain {

std::string TrainerState::to_json_text() const {
  nlohmann::json j;  // nlohmann's object keeps keys sorted, as json.dumps(sort_keys=True)
  j["best_global_step"] = best_global_step;
  j["best_metric"] = best_metric;
  j["best_model_checkpoint"] = best_model_checkpoint;
  j["epoch"] = epoch;
  j["eval_steps"] = eval_steps;
  j["global_step"] = global_step;
  j["is_hyper_param_search"] = false;
  j["is_local_process_zero"] = true;
  j["is_world_process_zero"] = true;
  j["log_history"] = log_history;
  j["logging_steps"] = logging_steps;
  j["max_steps"] = max_steps;
  j["num_input_tokens_seen"] = 0;
  j["num_train_epochs"] = num_train_epochs;
  j["save_steps"] = save_steps;
  j["stateful_callbacks"] = stateful_callbacks;
  j["total_flos"] = total_flos;
  j["train_batch_size"] = train_batch_size;
  j["trial_name"] = nullptr;
  j["trial_params"] = nullptr;
  return j.dump(2) + "\n";
}

}  // namespace hftrain
