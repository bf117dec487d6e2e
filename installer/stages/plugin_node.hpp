// The plugin stage of the node part, with the node's own identity: it
// cannot read DaemonSets (RBAC NodeRules have none), so it looks at what the
// cluster part made as it reaches this node: the plugin pod bound here, and
// the ConfigMap that pod mounts (plugin/live_plugin.hpp). It changes
// nothing; it waits, bounded, for the DaemonSet to start a pod on a node
// just labelled.
#pragma once

#include "gpunode/stage.hpp"

namespace gpunode {

Check check_plugin_from_node(Context& ctx);
// Waits until a plugin pod is bound to this node, or says the cluster part
// is missing.
Result<void> wait_for_plugin_pod(Context& ctx);

}  // namespace gpunode
