// Tokenizing one long row with a tokenizer.json: seconds per row (best of --repeats) for rows of the given
// lengths in characters, cut from a text file (repeated as needed). With a Llama-2 legacy layout file the whole
// row is one BPE word, the case where merging cost grows with the row. See bench/RESULTS.md.
// Usage: tokenizer_bench TOKENIZER_JSON TEXT_FILE [LENGTH ...] [--repeats N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizers/hf_tokenizer.h"
#include "tokenizers/unicode_text.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TOKENIZER_JSON TEXT_FILE [LENGTH ...] [--repeats N]\n", argv[0]);
    return 2;
  }
  std::vector<std::size_t> lengths;
  int repeats = 3;
  for (int i = 3; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--repeats" && i + 1 < argc) repeats = std::stoi(argv[++i]);
    else lengths.push_back(std::stoul(a));
  }
  if (lengths.empty()) lengths = {1000, 8000, 32000, 128000};
  try {
    auto tok = hftrain::HfTokenizer::from_file(argv[1], "bench");
    std::ifstream in(argv[2], std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    auto cps = hftrain::unicode::code_points(hftrain::unicode::sanitize_utf8(buf.str()));
    if (cps.empty()) throw std::runtime_error("empty text file");
    std::printf("chars\tids\tseconds\n");
    for (std::size_t n : lengths) {
      std::string row;
      for (std::size_t k = 0; k < n; ++k) hftrain::unicode::append_utf8(row, cps[k % cps.size()]);
      double best = 1e30;
      std::size_t ids = 0;
      for (int r = 0; r < repeats; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        ids = tok->encode(row).size();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      std::printf("%zu\t%zu\t%.4f\n", n, ids, best);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
