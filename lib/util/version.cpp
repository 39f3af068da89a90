// `hftrain --version` text: our version and the LibTorch it was built against.
#include "util/version.h"

#include "util/torch_compat.h"

#ifndef HFTRAIN_VERSION
#define HFTRAIN_VERSION "unknown"
#endif

namespace hftrain {

std::string version_text() { return std::string("hftrain ") + HFTRAIN_VERSION + " (LibTorch " + torch_version_string() + ")"; }

}  // namespace hftrain
