// Atomic checkpoint commit (see checkpoint_writer.h).
#include "checkpoint/checkpoint_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "checkpoint/checkpoint_files.h"
#include "util/fault_injection.h"
#include "util/error.h"
#include "util/fd_io.h"
#include "util/fs.h"

namespace hftrain {
namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail_write(const std::string& path, int err) {
  throw RuntimeFailure("cannot write '" + path + "': " + std::strerror(err));
}

// A fault-injection point; an injected errno fails the step like a real one.
void write_point(const std::string& what, const std::string& path) {
  if (int err = fault::write_step(what)) fail_write(path, err);
}

// Writes all `n` bytes; on an error closes `fd` and throws.
void write_or_throw(int fd, const char* p, std::size_t n, const std::string& path) {
  if (write_all(fd, p, n)) return;
  const int err = errno;
  ::close(fd);
  fail_write(path, err);
}

void fsync_dir_or_throw(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail_write(dir, errno);
  if (::fsync(fd) != 0 && errno != EINVAL) {  // EINVAL: the filesystem cannot sync directories
    const int err = errno;
    ::close(fd);
    fail_write(dir, err);
  }
  ::close(fd);
}

void rename_or_throw(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    throw RuntimeFailure("cannot rename '" + from + "' to '" + to + "': " + std::strerror(errno));
}

}  // namespace

void write_file_durably(const std::string& path, const std::string& bytes) {
  const std::string name = fs::path(path).filename().string();
  const std::size_t half = bytes.size() / 2;
  write_point("write first half of " + name, path);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail_write(path, errno);
  write_or_throw(fd, bytes.data(), half, path);
  try {
    write_point("write rest of " + name, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  write_or_throw(fd, bytes.data() + half, bytes.size() - half, path);
  try {
    write_point("fsync " + name, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail_write(path, err);
  }
  if (::close(fd) != 0) fail_write(path, errno);
}

void remove_stale_temporaries(const std::string& output_dir) {
  std::error_code ec;
  if (!fs::is_directory(output_dir, ec)) return;
  for (const auto& entry : fs::directory_iterator(output_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!ckpt::is_stale_temporary(name)) continue;
    std::error_code rm;
    fs::remove_all(entry.path(), rm);
    if (rm) std::cerr << "warning: could not remove stale '" << entry.path().string() << "': " << rm.message() << std::endl;
  }
}

CheckpointWriter::CheckpointWriter(std::string output_dir, int64_t step)
    : output_dir_(std::move(output_dir)), step_(step),
      tmp_dir_((fs::path(output_dir_) / ckpt::partial_dir_name(step)).string()) {
  std::error_code ec;
  fs::remove_all(tmp_dir_, ec);
  write_point("create " + ckpt::partial_dir_name(step), tmp_dir_);
  fs::create_directories(tmp_dir_, ec);
  if (ec) throw RuntimeFailure("cannot create checkpoint directory '" + tmp_dir_ + "': " + ec.message());
}

CheckpointWriter::~CheckpointWriter() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(tmp_dir_, ec);
}

void CheckpointWriter::refuse_repeat(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name)
      throw RuntimeFailure("checkpoint: '" + name + "' was given twice for " + ckpt::checkpoint_dir_name(step_) +
                           " (its manifest lists each file once)");
}

void CheckpointWriter::add(const std::string& name, const std::string& bytes) {
  if (!is_safe_relative_path(name)) throw RuntimeFailure("checkpoint file name '" + name + "' is not a relative path");
  const fs::path path = fs::path(tmp_dir_) / name;
  if (name.find('/') != std::string::npos) {
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    if (ec) throw RuntimeFailure("cannot create '" + path.parent_path().string() + "': " + ec.message());
  }
  refuse_repeat(name);
  write_file_durably(path.string(), bytes);
  entries_.push_back({name, bytes.size(), xxh64_of(bytes.data(), bytes.size())});
}

void CheckpointWriter::adopt(const std::string& name) {
  if (!is_safe_relative_path(name)) throw RuntimeFailure("checkpoint file name '" + name + "' is not a relative path");
  refuse_repeat(name);
  const std::string path = (fs::path(tmp_dir_) / name).string();
  const FileDigest digest = digest_file(path);  // streamed: adopting a large shard needs no memory for it
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_write(path, errno);
  write_point("fsync " + name, path);
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail_write(path, err);
  }
  ::close(fd);
  const std::string parent = fs::path(path).parent_path().string();
  if (parent != tmp_dir_) fsync_dir_or_throw(parent);
  entries_.push_back({name, digest.size, digest.xxh64});
}

std::string CheckpointWriter::commit(bool save_only_model) {
  Manifest m;
  m.global_step = step_;
  m.save_only_model = save_only_model;
  m.files = entries_;
  m.layout = layout_;
  write_file_durably((fs::path(tmp_dir_) / ckpt::kManifestFile).string(), m.to_json().dump(2) + "\n");
  write_point("fsync " + ckpt::partial_dir_name(step_), tmp_dir_);
  std::error_code walk;
  for (const auto& entry : fs::recursive_directory_iterator(tmp_dir_, walk))
    if (entry.is_directory()) fsync_dir_or_throw(entry.path().string());
  fsync_dir_or_throw(tmp_dir_);

  const std::string final_dir = (fs::path(output_dir_) / ckpt::checkpoint_dir_name(step_)).string();
  const std::string replaced = (fs::path(output_dir_) / ckpt::replaced_dir_name(step_)).string();
  std::error_code ec;
  const bool replacing = fs::exists(final_dir, ec);
  if (replacing) {
    // An older checkpoint-N (e.g. from a run that was resumed from an earlier step): move it aside
    // first so checkpoint-N is always either the old or the new complete directory, never a mix.
    fs::remove_all(replaced, ec);
    write_point("move aside existing " + ckpt::checkpoint_dir_name(step_), final_dir);
    rename_or_throw(final_dir, replaced);
  }
  write_point("rename " + ckpt::partial_dir_name(step_) + " to " + ckpt::checkpoint_dir_name(step_), final_dir);
  if (std::rename(tmp_dir_.c_str(), final_dir.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    if (replacing) std::rename(replaced.c_str(), final_dir.c_str());  // put the old one back
    throw RuntimeFailure("cannot rename '" + tmp_dir_ + "' to '" + final_dir + "': " + why);
  }
  committed_ = true;
  write_point("fsync output_dir", output_dir_);
  fsync_dir_or_throw(output_dir_);
  if (replacing) {
    write_point("remove replaced " + ckpt::checkpoint_dir_name(step_), replaced);
    fs::remove_all(replaced, ec);
  }
  return final_dir;
}

}  // namespace hftrain
