// An environment of exactly the given variables, for the launcher-environment tests (distributed/env.h).
#pragma once

#include <map>
#include <string>

#include "distributed/env.h"

namespace hftrain_test {

inline hftrain::EnvLookup fake_env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name, std::string& value) {
    auto it = vars.find(name);
    if (it == vars.end()) return false;
    value = it->second;
    return true;
  };
}

}  // namespace hftrain_test
