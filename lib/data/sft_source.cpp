// The supervised fine-tuning side of the file data sources (TRL SFTTrainer's data handling): the SFTConfig
// options, the chat template, the dataset format told from the columns, the examples with their label masks
// (sft_rows.h) and packing (best_fit_packing.h). See file_sources.h and docs/data.md.
#include <algorithm>

#include "data/best_fit_packing.h"
#include "data/file_sources.h"
#include "log/logger.h"
#include "util/error.h"

namespace hftrain {

void FileDataSource::Options::declare_sft(Schema<Options>& s) {
  s.add("dataset_text_field", &Options::dataset_text_field,
        "TRL's language-modeling column: its text gets EOS appended (when it does not end with it), as SFTTrainer "
        "does; \"\" = text_column, as run_clm (no EOS).");
  s.add("chat_template", &Options::chat_template,
        "A chat template file (.jinja), or a tokenizer directory whose template to use (TRL's chat_template_path); "
        "\"\" = the tokenizer's (chat_template.jinja, tokenizer_config.json's chat_template).")
      .path();
  s.add("chat_template_name", &Options::chat_template_name,
        "Which template of a tokenizer_config.json list of {name, template}; \"\" = 'default'.");
  s.add("completion_only_loss", &Options::completion_only_loss,
        "Prompt-completion data: loss on the completion's tokens only (null = true, as TRL).");
  s.add("assistant_only_loss", &Options::assistant_only_loss,
        "Conversational data: loss on the assistant's tokens only, from the template's {% generation %} spans, "
        "else by rendering prefixes (refused where the template changes earlier turns).");
  s.add("packing", &Options::packing,
        "Pack examples into rows of max_length tokens (TRL's packing), by packing_strategy.");
  s.add("packing_strategy", &Options::packing_strategy,
        "bfd: best-fit decreasing of whole examples, each attending only to itself; wrapped: the stream cut into rows.")
      .choices({"bfd", "wrapped"});
  s.add("eos_token", &Options::eos_token,
        "The EOS token appended to language-modeling text and completions (and the template's eos_token), and the "
        "eos of the saved tokenizer and model (config.json, generation_config.json); \"\" = the tokenizer's.");
  s.add("pad_token", &Options::pad_token, "The padding token (one token of the vocabulary); \"\" = the tokenizer's.");
}

void FileDataSource::setup_sft(const SpecialTokenIds& special) {
  const Options defaults;
  if (task_ != TaskKind::kCausalLm) {
    for (const auto& [key, differs] : std::vector<std::pair<std::string, bool>>{
             {"dataset_text_field", !options_.dataset_text_field.empty()},
             {"chat_template", !options_.chat_template.empty()},
             {"chat_template_name", !options_.chat_template_name.empty()},
             {"completion_only_loss", options_.completion_only_loss.has_value()},
             {"assistant_only_loss", options_.assistant_only_loss},
             {"packing", options_.packing},
             {"eos_token", !options_.eos_token.empty()}})
      if (differs) throw ConfigError("data." + key + ": applies to task causal_lm (TRL's SFT data), not " + options_.task);
  }
  if (options_.packing && options_.block_size > 0)
    throw ConfigError("data.packing: packs examples into rows of max_length; block_size is run_clm's packing: give one");
  if (options_.packing && options_.max_length < 1)
    throw ConfigError("data.max_length: packing: true needs the length of a packed row (max_length > 0)");
  if (options_.packing_strategy != defaults.packing_strategy && !options_.packing)
    throw ConfigError("data.packing_strategy: applies with packing: true");
  if (!options_.dataset_text_field.empty() && options_.text_column != defaults.text_column)
    throw ConfigError("data.dataset_text_field: TRL's name for the text column; text_column is given too: give one");
  chat_ = ChatTemplate::load({options_.tokenizer, options_.chat_template, options_.chat_template_name,
                              options_.eos_token, options_.pad_token});
  eos_text_ = options_.eos_token;
  if (eos_text_.empty() && chat_) eos_text_ = chat_->special_token("eos_token");
  if (eos_text_.empty() && special.eos) eos_text_ = tokenizer_->decode({*special.eos});
  if (!options_.eos_token.empty()) {
    // TRL's eos_token is a token of the vocabulary: it becomes the eos of the saved tokenizer and model. The
    // built-in byte and character tokenizers save no files, so any text serves them.
    const std::vector<int64_t> ids = tokenizer_->encode(options_.eos_token);
    if (ids.size() == 1) eos_override_ = ids[0];
    else if (!tokenizer_->files().empty())
      throw ConfigError("data.eos_token: '" + options_.eos_token + "' is " + std::to_string(ids.size()) +
                        " tokens of the tokenizer, not one (TRL's eos_token must be a token of the vocabulary: it "
                        "becomes the saved tokenizer's and model's eos)");
  }
  if (!options_.pad_token.empty()) {
    const std::vector<int64_t> ids = tokenizer_->encode(options_.pad_token);
    if (ids.size() != 1)
      throw ConfigError("data.pad_token: '" + options_.pad_token + "' is " + std::to_string(ids.size()) +
                        " tokens of the tokenizer, not one");
    pad_override_ = ids[0];
  }
}

TokenizerChanges FileDataSource::tokenizer_changes() const {
  TokenizerChanges c;
  if (!options_.chat_template.empty() && chat_) c.chat_template = chat_->text();
  if (eos_override_) {
    c.eos_token = options_.eos_token;
    c.eos_token_id = eos_override_;
  }
  return c;
}

SftFormat FileDataSource::choose_format(const std::vector<Row>& train_rows, const std::vector<Row>& eval_rows) {
  if (task_ != TaskKind::kCausalLm) return SftFormat::kPlain;
  const SftFormat f = detect_sft_format(train_rows.empty() ? eval_rows : train_rows, options_.dataset_text_field,
                                        options_.text_column);
  const bool conversational = f == SftFormat::kConversational || f == SftFormat::kConversationalPromptCompletion;
  const bool prompt_completion = f == SftFormat::kPromptCompletion || f == SftFormat::kConversationalPromptCompletion;
  const std::string what = describe_sft_format(f, options_.dataset_text_field);
  if (options_.assistant_only_loss && !conversational)
    throw ConfigError("data.assistant_only_loss: applies to conversational data; the rows are " + what);
  if (options_.completion_only_loss.has_value() && !prompt_completion)
    throw ConfigError("data.completion_only_loss: applies to prompt-completion data; the rows are " + what);
  if (conversational && !chat_)
    throw ConfigError("data.chat_template: the rows are " + what + ", and the tokenizer '" + options_.tokenizer +
                      "' has no chat template (chat_template.jinja or tokenizer_config.json's chat_template): give "
                      "data.chat_template (TRL's chat_template_path)");
  if ((f == SftFormat::kLanguageModeling || f == SftFormat::kPromptCompletion) && eos_text_.empty())
    throw ConfigError("data.eos_token: the rows are " + what + ", which TRL ends with EOS, and the tokenizer '" +
                      options_.tokenizer + "' has no EOS token: give data.eos_token");
  return f;
}

std::vector<Example> FileDataSource::convert_sft(const std::string& file, const std::vector<Row>& rows, SftFormat format,
                                                const BadRow& bad) {
  SftSettings settings;
  settings.tokenizer = tokenizer_.get();
  settings.chat = chat_template();
  settings.text_field = options_.dataset_text_field;
  settings.completion_only_loss = options_.completion_only_loss.value_or(true);
  settings.assistant_only_loss = options_.assistant_only_loss;
  settings.eos_token = eos_text_;
  // bfd truncates each example to a row's length itself; wrapped cuts the whole stream.
  settings.max_length = options_.packing ? 0 : options_.max_length;
  std::vector<Example> examples;
  for (const Row& row : rows) {
    if (!row.problem.empty()) {
      bad(row, RowIssue{row.problem_column, row.problem});
      continue;
    }
    try {
      examples.push_back(make_sft_example(row, format, settings));
      ++tokenized_rows_;
    } catch (const SftRowError& e) {
      bad(row, e.issue);
    } catch (const ConfigError& e) {  // a template's error (jinja::TemplateError) or a mask's refusal
      throw ConfigError(row_location(file, row) + ": " + e.what());
    }
  }
  return examples;
}

std::vector<Example> FileDataSource::pack_split(std::vector<Example> examples) const {
  if (!options_.packing || examples.empty()) return examples;
  const auto before = examples.size();
  std::vector<Example> rows = pack_examples(examples, options_.packing_strategy, options_.max_length);
  log_info("data: packed " + std::to_string(before) + " examples into " + std::to_string(rows.size()) + " rows of up to " +
           std::to_string(options_.max_length) + " tokens (" + options_.packing_strategy + ")");
  return rows;
}

}  // namespace hftrain
