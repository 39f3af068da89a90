// AdamW is declared in adam.h beside Adam; this header remains for code that includes it by name.
#pragma once

#include "optim/adam.h"
