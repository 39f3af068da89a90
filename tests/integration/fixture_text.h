// Small text datasets shared by integration tests: a two-class sentiment CSV whose rows are easy to
// learn (positive and negative words never mix), deterministic for a given row count and salt.
#pragma once

#include <string>

namespace hftrain_test {

// "sentence,label" header, then n rows of 2-6 words labelled "pos" (about two thirds) or "neg".
inline std::string sentiment_csv(int n, int salt) {
  const char* pos[] = {"good", "great", "fine", "nice", "happy"};
  const char* neg[] = {"bad", "awful", "sad", "poor", "ugly"};
  std::string text = "sentence,label\n";
  for (int i = 0; i < n; ++i) {
    const bool p = ((i * 7 + salt) % 3) != 0;
    std::string line;
    for (int w = 0; w < 2 + (i + salt) % 5; ++w) line += std::string(w ? " " : "") + (p ? pos : neg)[(i * 3 + w + salt) % 5];
    text += line + "," + (p ? "pos" : "neg") + "\n";
  }
  return text;
}

}  // namespace hftrain_test
