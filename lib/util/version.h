// Version string printed by `hftrain --version`.
#pragma once

#include <string>

namespace hftrain {

std::string version_text();

}  // namespace hftrain
