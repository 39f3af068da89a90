// The tokenizer files a saved model directory holds, as transformers' tokenizer save_pretrained writes the
// run's processing_class after TRL's SFTTrainer changed it: the files the tokenizer was read from, with the
// chat template the spec gave (data.chat_template, TRL's chat_template_path) saved as chat_template.jinja
// (what current transformers writes, dropping tokenizer_config.json's chat_template key) and TRL's
// SFTConfig.eos_token as the eos_token of tokenizer_config.json and special_tokens_map.json. Free of LibTorch.
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"

namespace hftrain {

struct SavedTokenizerFile {
  std::string name;  // its name in the model directory
  std::string text;  // its contents
};

// `tokenizer`'s files (Tokenizer::files, read now) with `changes` applied; empty when it has no files (the
// built-in byte and character tokenizers). Unchanged files keep their bytes; a changed JSON file is written
// with two-space indents and its keys in their order. RuntimeFailure names a file that cannot be read or
// is not a JSON object.
std::vector<SavedTokenizerFile> tokenizer_files_to_save(const Tokenizer& tokenizer, const TokenizerChanges& changes);

}  // namespace hftrain
