"""The DaemonSet controller (pkg/controller/daemon): one pod per node the
template selects (NodeShouldRunDaemonPod: nodeSelector and required node
affinity; no taints are modelled), pods of nodes no longer selected are
deleted, rolling updates replace outdated pods, and the status counts run
over all nodes (updateDaemonSetStatus)."""

import copy
import hashlib

from . import apierrors as errors
from .conditions import condition
from .affinity import node_matches, target_node, with_node_name_affinity
from .objects import get_path
from .resources import BY_KIND

PODS = BY_KIND["Pod"]
NODES = BY_KIND["Node"]
DAEMONSETS = BY_KIND["DaemonSet"]
DS_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
)


def template_hash(ds):
    text = repr(sorted_json(get_path(ds, ("spec", "template"), {})))
    digest = hashlib.sha256(text.encode()).digest()
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return "".join(alphabet[b % len(alphabet)] for b in digest[:10])


def sorted_json(value):
    if isinstance(value, dict):
        return {k: sorted_json(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [sorted_json(v) for v in value]
    return value


def controller_of(obj):
    for ref in obj["metadata"].get("ownerReferences", []):
        if ref.get("controller"):
            return ref
    return None


class DaemonSetController:
    def __init__(self, cluster):
        self.cluster = cluster
        self.store = cluster.store
        self.registry = cluster.registry

    def nodes(self):
        return [n for n in (self.store.get(NODES, None, k.node_name)
                            for k in self.cluster.kubelets) if n is not None]

    def pods_of(self, owner):
        uid = owner["metadata"]["uid"]
        pods = self.store.list(PODS, owner["metadata"]["namespace"])
        return [p for p in pods
                if (controller_of(p) or {}).get("uid") == uid]

    def sync(self):
        nodes = self.nodes()
        for ds in self.store.list(DAEMONSETS):
            if ds["metadata"].get("deletionTimestamp"):
                continue
            template_spec = get_path(ds, ("spec", "template", "spec"), {})
            current = template_hash(ds)
            rolling = get_path(ds, ("spec", "updateStrategy", "type"),
                               "RollingUpdate") == "RollingUpdate"
            all_pods = self.pods_of(ds)
            names = {n["metadata"]["name"] for n in nodes}
            for pod in all_pods:  # pods of nodes that are gone
                if target_node(pod) not in names and \
                        not pod["metadata"].get("deletionTimestamp"):
                    self._delete_pod(ds, pod)
            for node in nodes:
                name = node["metadata"]["name"]
                on_node = [p for p in all_pods if target_node(p) == name]
                self._sync_node(ds, node, node_matches(template_spec, node),
                                on_node, current, rolling)

    def _sync_node(self, ds, node, wanted, pods, current, rolling):
        keep = []
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp"):
                continue
            outdated = pod["metadata"].get("labels", {}).get(
                "controller-revision-hash") != current
            failed = get_path(pod, ("status", "phase")) == "Failed"
            if not wanted or failed or (outdated and rolling) or keep:
                self._delete_pod(ds, pod)
            else:
                keep.append(pod)
        terminating = any(
            p["metadata"].get("deletionTimestamp") for p in self.pods_of(ds)
            if target_node(p) == node["metadata"]["name"])
        if wanted and not keep and not terminating:
            self._create_pod(ds, node, current)

    def _delete_pod(self, ds, pod):
        self.registry.delete(PODS, pod["metadata"]["namespace"],
                             pod["metadata"]["name"], {})
        self.cluster.event(ds, "Normal", "SuccessfulDelete",
                           f"Deleted pod: {pod['metadata']['name']}",
                           "daemonset-controller")

    def _create_pod(self, ds, node, revision):
        template = copy.deepcopy(get_path(ds, ("spec", "template"), {}))
        metadata = template.get("metadata") or {}
        labels = dict(metadata.get("labels") or {})
        labels["controller-revision-hash"] = revision
        labels["pod-template-generation"] = ds["metadata"].get(
            "annotations", {}).get("deprecated.daemonset.template.generation",
                                   "1")
        pod_meta = {"generateName": ds["metadata"]["name"] + "-",
                    "labels": labels,
                    "ownerReferences": [{
                        "apiVersion": "apps/v1", "kind": "DaemonSet",
                        "name": ds["metadata"]["name"],
                        "uid": ds["metadata"]["uid"], "controller": True,
                        "blockOwnerDeletion": True}]}
        if metadata.get("annotations"):
            pod_meta["annotations"] = metadata["annotations"]
        spec = template.get("spec") or {}
        spec["affinity"] = with_node_name_affinity(spec.get("affinity"),
                                                   node["metadata"]["name"])
        tolerations = spec.setdefault("tolerations", [])
        for key, effect in DS_TOLERATIONS:
            if not any(t.get("key") == key for t in tolerations):
                tolerations.append({"key": key, "operator": "Exists",
                                    "effect": effect})
        try:
            pod = self.registry.create(PODS, ds["metadata"]["namespace"],
                                       {"metadata": pod_meta, "spec": spec},
                                       "k3s")
        except errors.ApiError as err:
            self.cluster.event(ds, "Warning", "FailedCreate",
                               f"Error creating: {err.message}",
                               "daemonset-controller")
            return
        self.cluster.event(ds, "Normal", "SuccessfulCreate",
                           f"Created pod: {pod['metadata']['name']}",
                           "daemonset-controller")

    def sync_status(self):
        nodes = self.nodes()
        for ds in self.store.list(DAEMONSETS):
            pods = [p for p in self.pods_of(ds)
                    if not p["metadata"].get("deletionTimestamp")]
            template_spec = get_path(ds, ("spec", "template", "spec"), {})
            wanted = {n["metadata"]["name"] for n in nodes
                      if node_matches(template_spec, n)}
            scheduled = {target_node(p) for p in pods}
            ready = sum(1 for p in pods if (condition(
                get_path(p, ("status", "conditions")), "Ready") or {}).get(
                "status") == "True")
            current = template_hash(ds)
            updated = sum(1 for p in pods if p["metadata"].get(
                "labels", {}).get("controller-revision-hash") == current)
            desired = len(wanted)
            status = {"currentNumberScheduled": len(scheduled & wanted),
                      "numberMisscheduled": len(scheduled - wanted),
                      "desiredNumberScheduled": desired, "numberReady": ready,
                      "observedGeneration": ds["metadata"].get("generation",
                                                               1)}
            for key, value in (("updatedNumberScheduled", updated),
                               ("numberAvailable", ready),
                               ("numberUnavailable", desired - ready)):
                if value > 0:
                    status[key] = value
            ds["status"] = status
            self.registry.save(DAEMONSETS, ds)
