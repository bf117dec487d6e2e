#include "plugin/slot_expectation.hpp"

#include "plugin/gpu_labels.hpp"
#include "plugin/gpu_nodes.hpp"

namespace gpunode {

namespace {

// What `node` advertises now: the GPU resource it lists a count of.
void fill_advertised(const kube::json& node, NodeExpectation& n) {
  for (const char* r : {kGpuResource, kSharedGpuResource}) {
    const long long have = advertised(node, r).value_or(0);
    if (have > 0) {
      n.now_resource = r;
      n.now = have;
    }
  }
}

}  // namespace

Result<SlotExpectation> expect_slots(const ExpectationSources& from) {
  SlotExpectation out;
  out.plan = from.plan;
  std::optional<int> own_gpus;
  if (from.node_part) {
    if (!from.node) {
      out.name_unknown = from.node.error();
    } else if (!from.gpus) {
      out.gpus_unknown = from.gpus.error();
    } else {
      own_gpus = static_cast<int>((*from.gpus)->gpus.size());
      NodeExpectation self;
      self.node = *from.node;
      self.this_node = true;
      self.gpus = own_gpus;
      for (const GpuInfo& g : (*from.gpus)->gpus)
        if (!g.uuid.empty()) self.uuids.push_back(g.uuid);
      self.expected = from.plan->slots_for(*own_gpus);
      out.self = self;
    }
  }
  if (!from.cluster_part) {
    // What this node advertises now, when its Node can be read; a stage
    // that needs the Node reports why it cannot.
    if (out.self) {
      out.self->now_known = false;
      if (from.kube != nullptr) {
        auto node =
            from.kube->get("/api/v1/nodes/" + out.self->node, from.deadline);
        if (node && *node) {
          out.self->now_known = true;
          out.self->labelled = (**node)["metadata"]
                                   .value("labels", kube::json::object())
                                   .value(kGpuPresentLabel, "") == "true";
          fill_advertised(**node, *out.self);
        }
      }
    }
    return out;
  }
  auto nodes = list_gpu_nodes(*from.kube, from.deadline);
  if (!nodes) return nodes.error();
  for (const GpuNode& g : *nodes) {
    NodeExpectation n;
    n.node = g.name;
    n.this_node = from.node_part && from.node && *from.node == g.name;
    n.gpus = n.this_node && own_gpus ? own_gpus : g.gpus;
    n.uuids =
        n.this_node && out.self ? out.self->uuids : published_gpu_uuids(g.node);
    n.labelled = g.labelled;
    n.serving = g.serving;
    fill_advertised(g.node, n);
    if (n.gpus) n.expected = from.plan->slots_for(*n.gpus);
    out.listed.push_back(std::move(n));
  }
  return out;
}

}  // namespace gpunode
