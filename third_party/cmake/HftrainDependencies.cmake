# Finds hftrain's dependencies. No third-party code lives in this repository: everything comes
# from the system (Debian 12 packages via scripts/install-deps.sh) or from prefixes you pass.
#
# A different LibTorch (e.g. the CUDA build inside a PyTorch 2.x wheel):
#   cmake -B build -DCMAKE_PREFIX_PATH="$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')"
# Version differences between LibTorch 1.13 and 2.x are guarded in lib/util/torch_compat.h only.

find_package(Torch REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(Threads REQUIRED)

# xxHash (checkpoint manifests) ships no CMake config on Debian: find header + library directly.
find_path(XXHASH_INCLUDE_DIR xxhash.h REQUIRED)
find_library(XXHASH_LIBRARY NAMES xxhash REQUIRED)
add_library(hftrain_xxhash INTERFACE)
target_include_directories(hftrain_xxhash INTERFACE ${XXHASH_INCLUDE_DIR})
target_link_libraries(hftrain_xxhash INTERFACE ${XXHASH_LIBRARY})

# yaml-cpp's exported target name differs between versions (yaml-cpp vs yaml-cpp::yaml-cpp).
if(TARGET yaml-cpp::yaml-cpp)
  set(HFTRAIN_YAML_TARGET yaml-cpp::yaml-cpp)
else()
  set(HFTRAIN_YAML_TARGET yaml-cpp)
endif()

if(HFTRAIN_BUILD_TESTS)
  find_package(Catch2 2 REQUIRED)
  include(Catch)
endif()
