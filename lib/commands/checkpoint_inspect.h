// `hftrain checkpoint inspect CHECKPOINT_DIR`: what a checkpoint holds and whether it is complete: the
// step and epoch, whether it can be resumed from, its layout (ZeRO stage, world size, flat groups and
// elements from the shards' partition maps, or one optimizer file), the precision it was trained in,
// every file with its size, and the manifest check (size and xxh64 of every file). Exit 0 when the
// checkpoint is complete, 1 when it is not (the problem is named).
#pragma once

#include <string>

namespace hftrain {

int run_checkpoint_inspect(const std::string& checkpoint_dir);

}  // namespace hftrain
