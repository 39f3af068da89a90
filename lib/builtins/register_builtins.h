// The one function that fills the component registries (train/components.h) with hftrain's built-in
// components, and the process-wide registries it fills. The top of the library: it reaches every layer.
#pragma once

#include "train/components.h"

namespace hftrain {

// Registers every built-in component explicitly (no static self-registration).
void register_builtins(Components& components);

// The process-wide registries, filled by register_builtins() on first use.
const Components& builtin_components();

}  // namespace hftrain
