"""The default scheduler: binds each pending pod to the first node that
fits (node selector and affinity, extended resources), or records why none
does in kube-scheduler's words (FitError.Error: "0/N nodes are available:
<sorted reason counts>. preemption: ...")."""

from .affinity import node_matches
from .objects import get_path
from .resources import BY_KIND

PODS = BY_KIND["Pod"]
NODES = BY_KIND["Node"]
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
# What the preemption post-filter says per node for each kind of misfit.
PREEMPTION = {AFFINITY: "Preemption is not helpful for scheduling"}
NO_VICTIMS = "No preemption victims found for incoming pod"


def extended_requests(pod):
    total = {}
    for container in pod.get("spec", {}).get("containers", []):
        resources = container.get("resources") or {}
        wanted = dict(resources.get("limits") or {})
        wanted.update(resources.get("requests") or {})
        for name, value in wanted.items():
            if "/" in name and not name.startswith("kubernetes.io/"):
                total[name] = total.get(name, 0) + int(str(value))
    return total


def _histogram(reasons):
    counts = {}
    for reason in reasons:
        counts[reason] = counts.get(reason, 0) + 1
    # sortReasonsHistogram: "N reason" strings, sorted.
    return ", ".join(sorted(f"{n} {r}" for r, n in counts.items()))


class Scheduler:
    def __init__(self, cluster):
        self.cluster = cluster
        self.store = cluster.store

    def schedule(self):
        nodes = [n for n in (self.store.get(NODES, None, k.node_name)
                             for k in self.cluster.kubelets) if n is not None]
        if not nodes:
            return
        for pod in self.store.list(PODS):
            spec = pod.get("spec", {})
            if spec.get("nodeName") or pod["metadata"].get(
                    "deletionTimestamp") or spec.get(
                    "schedulerName", "default-scheduler") != \
                    "default-scheduler":
                continue
            misfits = []
            chosen = None
            for node in nodes:
                why = self._misfit(pod, node)
                if not why:
                    chosen = node
                    break
                misfits.append(why)
            self._record(pod, chosen, misfits, len(nodes))

    def _record(self, pod, node, misfits, count):
        cluster = self.cluster
        conditions = pod.setdefault("status", {}).setdefault("conditions", [])
        if node is not None:
            name = node["metadata"]["name"]
            pod["spec"]["nodeName"] = name
            cluster.set_condition(conditions, "PodScheduled", "True")
            cluster.registry.save(PODS, pod)
            cluster.event(pod, "Normal", "Scheduled",
                          f"Successfully assigned "
                          f"{pod['metadata']['namespace']}/"
                          f"{pod['metadata']['name']} to {name}",
                          "default-scheduler")
            return
        reasons = [r for why in misfits for r in why]
        preemption = [PREEMPTION.get(why[0], NO_VICTIMS) for why in misfits]
        message = (f"0/{count} nodes are available: {_histogram(reasons)}. "
                   f"preemption: 0/{count} nodes are available: "
                   f"{_histogram(preemption)}.")
        cluster.set_condition(conditions, "PodScheduled", "False",
                              "Unschedulable", message)
        cluster.registry.save(PODS, pod)
        cluster.event(pod, "Warning", "FailedScheduling", message,
                      "default-scheduler")

    def _misfit(self, pod, node):
        """The filter plugins' reasons against this node ([] = fits)."""
        if not node_matches(pod.get("spec", {}), node):
            return [AFFINITY]
        allocatable = node.get("status", {}).get("allocatable", {})
        name = node["metadata"]["name"]
        return [f"Insufficient {res}" for res, count in
                sorted(extended_requests(pod).items())
                if count > int(allocatable.get(res, "0")) -
                self._used(res, pod, name)]

    def _used(self, resource, excluding, node_name):
        used = 0
        for pod in self.store.list(PODS):
            if pod["metadata"]["uid"] == excluding["metadata"]["uid"]:
                continue
            if pod.get("spec", {}).get("nodeName") == node_name and \
                    get_path(pod, ("status", "phase")) not in ("Succeeded",
                                                               "Failed"):
                used += extended_requests(pod).get(resource, 0)
        return used
