// The environment of a child whose peak resident memory a test measures (wait4's ru_maxrss): glibc's malloc with a
// fixed mmap threshold, so that every large block goes back to the system when freed and the peak follows the live
// memory. With its adaptive threshold (raised as large blocks are freed) freed memory can stay in the heap by an
// amount that follows the threads' timing, which differed by 40 MiB between two machines on one test.
#pragma once

#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

// This process's environment plus MALLOC_MMAP_THRESHOLD_=65536, built before fork (the pointers stay valid while
// the object lives) for execve / execle in the child.
class PeakRssEnvironment {
 public:
  PeakRssEnvironment() {
    for (char** e = environ; *e != nullptr; ++e)
      if (std::strncmp(*e, "MALLOC_MMAP_THRESHOLD_=", 23) != 0) entries_.emplace_back(*e);
    entries_.emplace_back("MALLOC_MMAP_THRESHOLD_=65536");
    for (auto& entry : entries_) pointers_.push_back(entry.data());
    pointers_.push_back(nullptr);
  }
  PeakRssEnvironment(const PeakRssEnvironment&) = delete;  // the pointers point into this object's strings
  PeakRssEnvironment& operator=(const PeakRssEnvironment&) = delete;
  char* const* envp() const { return pointers_.data(); }

 private:
  std::vector<std::string> entries_;
  std::vector<char*> pointers_;
};
