// trainer_state.json serialisation (see trainer_state.h).
#include "train/trainer_state.h"

#include "util/error.h"

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
  j["num_input_tokens_seen"] = num_input_tokens_seen;
  j["num_train_epochs"] = num_train_epochs;
  j["save_steps"] = save_steps;
  j["stateful_callbacks"] = stateful_callbacks;
  j["total_flos"] = total_flos;
  j["train_batch_size"] = train_batch_size;
  j["trial_name"] = nullptr;
  j["trial_params"] = nullptr;
  return j.dump(2) + "\n";
}

TrainerState TrainerState::from_json_text(const std::string& text, const std::string& source) {
  TrainerState s;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (!j.is_object()) throw RuntimeFailure("'" + source + "' is not a JSON object");
    auto get = [&](const char* key, auto& field) {
      if (j.contains(key) && !j.at(key).is_null()) field = j.at(key).get<std::decay_t<decltype(field)>>();
    };
    get("global_step", s.global_step);
    get("epoch", s.epoch);
    get("max_steps", s.max_steps);
    get("num_train_epochs", s.num_train_epochs);
    get("logging_steps", s.logging_steps);
    get("eval_steps", s.eval_steps);
    get("save_steps", s.save_steps);
    get("train_batch_size", s.train_batch_size);
    get("total_flos", s.total_flos);
    get("num_input_tokens_seen", s.num_input_tokens_seen);
    if (j.contains("log_history")) s.log_history = j.at("log_history");
    if (!s.log_history.is_array()) throw RuntimeFailure("'" + source + "': log_history is not a list");
    s.best_metric = j.value("best_metric", nlohmann::json());
    s.best_global_step = j.value("best_global_step", nlohmann::json());
    s.best_model_checkpoint = j.value("best_model_checkpoint", nlohmann::json());
    s.stateful_callbacks = j.value("stateful_callbacks", nlohmann::json::object());
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeFailure("'" + source + "' is not a valid trainer_state.json: " + e.what());
  }
  return s;
}

}  // namespace hftrain
