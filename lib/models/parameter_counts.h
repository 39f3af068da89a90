// Parameter counts of a model as HF's num_parameters reports them (total, trainable, without embeddings),
// the input of the FLOP estimate (log/speed_metrics.h).
#pragma once

#include "log/speed_metrics.h"

namespace hftrain {

class Model;

// Each distinct tensor counted once (tied weights are one parameter), as HF num_parameters does; a 4-bit weight
// counts its logical elements (out x in), not its packed bytes (HF counts a Params4bit's bytes twice).
ParameterCounts count_parameters(const Model& model);

}  // namespace hftrain
