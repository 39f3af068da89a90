// The automatic thread policy: an explicit count wins; a step under kSmallStepFlops gets 1 intra-op
// thread and says why; larger steps keep the cores-based choice.
#include <catch2/catch.hpp>

#include "util/threads.h"

using namespace hftrain;

TEST_CASE("small steps get one intra-op thread, larger ones keep the cores-based choice", "[unit][threads]") {
  const ThreadPlan by_cores = choose_threads(0, 1);
  CHECK(by_cores.reason.empty());

  const ThreadPlan small = choose_threads(0, 1, 1.1e6);
  CHECK(small.intra_op_threads == 1);
  if (by_cores.intra_op_threads > 1) CHECK_THAT(small.reason, Catch::Contains("~1.1 MFLOP") && Catch::Contains("32 MFLOP"));

  const ThreadPlan large = choose_threads(0, 1, 2 * kSmallStepFlops);
  CHECK(large.intra_op_threads == by_cores.intra_op_threads);
  CHECK(large.reason.empty());

  const ThreadPlan explicit_count = choose_threads(3, 1, 1e3);
  CHECK(explicit_count.intra_op_threads == 3);
  CHECK(explicit_count.reason.empty());
}
