// THE ordered stage list, bottom layer first: a failure must name the lowest
// broken layer (FACTS.md, "the six layers"), so order is behaviour. The
// Node's GPU labels come once the node can run the plugin (handler,
// RuntimeClass, image), so the DaemonSet, which selects on them, never
// lands on a node that would leave its pod waiting. Adding a
// stage is its file (stages/NAME_stage.cpp, defining make_NAME_stage()),
// one line here, and its test; pipeline.cpp builds the list from this, and
// every other list is read from the binary. What is written for people, the
// README's table row and the facts section in docs/json-events.md, is held
// to this list by test/e2e/stage_list_test.cpp, which names the file to
// edit (for a cluster-part stage also the Ansible module's
// CLUSTER_PART_STAGES and the role's cluster.yml).
#pragma once

#include <memory>

#include "gpunode/stage.hpp"

#define GPUNODE_STAGES(X) \
  X(preflight)            \
  X(driver)               \
  X(toolkit)              \
  X(handler)              \
  X(runtimeclass)         \
  X(image)                \
  X(labels)               \
  X(plugin)               \
  X(allocatable)          \
  X(smoke)

namespace gpunode {

#define GPUNODE_DECLARE_STAGE(name) \
  std::unique_ptr<Stage> make_##name##_stage();
GPUNODE_STAGES(GPUNODE_DECLARE_STAGE)
#undef GPUNODE_DECLARE_STAGE

}  // namespace gpunode
