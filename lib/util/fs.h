// Filesystem helpers: whole-file read, atomic file write (temp + fsync + rename), directory fsync.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hftrain {

std::string read_text_file(const std::string& path);
std::vector<char> read_binary_file(const std::string& path);

// Writes into "<path>.tmp.<pid>.<n>", fsyncs it, renames it over `path` and fsyncs the directory, so a reader
// sees either the old or the new file, never a partial one. Throws RuntimeFailure naming the path.
void write_file_atomic(const std::string& path, const void* data, std::size_t size);
void write_file_atomic(const std::string& path, const std::string& text);

void fsync_directory(const std::string& dir);

// Renames the complete, fsynced file `tmp` over `path` and fsyncs the directory (write_file_atomic's
// last step, for files written as a stream). On failure `tmp` is removed.
void rename_durably(const std::string& tmp, const std::string& path);

// True when `dir` does not exist or holds no entries.
bool directory_is_empty(const std::string& dir);

}  // namespace hftrain
