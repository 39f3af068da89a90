// The rules a run spec obeys across its options once every section is parsed: settings of two sections
// (or two options) that must agree, in one place, one named function per rule (spec_rules.cpp). A
// section's own constraints stay with its option declarations (Schema); checks that need the file
// system are SpecChecks passed to load_run_spec.
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/issues.h"
#include "runspec/run_spec.h"

namespace hftrain {

// What a rule reads: the parsed spec (a rule may add notes or fill DeepSpeed "auto" values), the spec's
// YAML (to locate a problem at the key that caused it), the registries, and where problems go.
struct SpecRuleInput {
  RunSpec& spec;
  const YAML::Node& root;
  const ComponentCatalog& catalog;
  Issues& issues;
};

struct SpecRule {
  const char* name;
  void (*check)(const SpecRuleInput& in);
};

// Every rule, in the order load_run_spec applies them.
const std::vector<SpecRule>& spec_rules();

// Why float16 cannot run on the CPU, and what to use instead (the spec rule and a CPU worker of a CUDA build).
inline constexpr const char* kFp16NeedsCuda =
    "float16 needs a CUDA device and this worker runs on the CPU (LibTorch has no CPU float16 matmul); use bf16 "
    "instead (precision.bf16: true), as HF refuses --fp16 on CPU";

// Why TF32 cannot be asked for on the CPU (the spec rule and a CPU worker of a CUDA build).
inline constexpr const char* kTf32NeedsGpu =
    "TF32 needs an Ampere or newer NVIDIA GPU (as HF says) and this worker runs on the CPU; remove it or set false";

// Applies every rule; problems go to in.issues (all of them, not the first only).
void check_spec_rules(const SpecRuleInput& in);

}  // namespace hftrain
