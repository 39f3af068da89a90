// hftrain reads model directories and tokenizer files from disk and downloads nothing: a value that names no
// local path, such as a Hub id (`gpt2`, `meta-llama/Llama-3.1-8B`) given as model.from_pretrained or
// data.tokenizer, gets this one hint, worded the same wherever it is given.
#pragma once

#include <string>

namespace hftrain {

// "nothing is downloaded: a hub id needs a local copy, ...": appended to the message that names the key and
// the value that is no local path.
inline std::string nothing_downloaded_hint() {
  return "nothing is downloaded: a hub id needs a local copy, e.g. one written by save_pretrained, and its path here";
}

}  // namespace hftrain
