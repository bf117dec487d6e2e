"""The cluster half of k3s, once for all nodes: namespaces (and the root-CA
publisher), the DaemonSet controller, the garbage collector and the
scheduler, plus admission; each node's kubelet and device plugin is a
NodeModel (node.py).

One loop (`tick`, every 20 ms and right after each write) compares what the
API holds with what runs and moves things one step, writing only what
changed, so an idle cluster produces no new resourceVersions.
"""

import threading
import time
import traceback

from . import apierrors as errors
from . import auth
from .conditions import set_condition
from .daemonset import DaemonSetController, controller_of
from .events import Recorder
from .mirror import digest_ref
from .objects import PRIORITY_CLASSES
from .resources import BY_KIND
from .scheduler import Scheduler

NODES = BY_KIND["Node"]
PODS = BY_KIND["Pod"]
DAEMONSETS = BY_KIND["DaemonSet"]
NAMESPACES = BY_KIND["Namespace"]
CONFIGMAPS = BY_KIND["ConfigMap"]
EVENTS = BY_KIND["Event"]
RUNTIMECLASSES = BY_KIND["RuntimeClass"]

IDLE_SECONDS = 0.5  # host re-check interval when nothing is pending
# k3s's manifests/runtimes.yaml (not nvidia-cdi).
K3S_RUNTIME_CLASSES = {
    "crun": "crun", "lunatic": "lunatic", "nvidia": "nvidia",
    "nvidia-experimental": "nvidia-experimental", "slight": "slight",
    "spin": "spin", "wasmedge": "wasmedge", "wasmer": "wasmer",
    "wasmtime": "wasmtime", "wws": "wws",
}
ROOT_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when "
    "using internal endpoints such as the internal service IP or "
    "kubernetes.default.svc. No other usage is guaranteed across "
    "distributions of Kubernetes clusters.")


class Cluster:
    def __init__(self, registry, ca_pem, k3s_runtime_classes=False):
        self.registry = registry
        self.store = registry.store
        self.ca_pem = ca_pem
        self.k3s_runtime_classes = k3s_runtime_classes
        self.recorder = Recorder(registry)
        self.kubelets = []  # node.NodeModel, the first is the default one
        self.daemonsets = DaemonSetController(self)
        self.scheduler = Scheduler(self)
        self.wake = threading.Event()
        self.now = time.time()
        self.next_due = 0.0
        registry.admit = self.admit
        registry.admit_change = auth.admit_node_restriction
        registry.graceful_delete = self.graceful_delete
        self.store.on_commit = self.wake.set

    def kubelet(self, name=None):
        """The node's kubelet (the first node's without a name), or None."""
        if not name:
            return self.kubelets[0]
        return next((k for k in self.kubelets if k.node_name == name), None)

    def bound_kubelet(self, pod):
        """The kubelet of the node a pod is bound to, or None."""
        name = pod.get("spec", {}).get("nodeName")
        return self.kubelet(name) if name else None

    def peer_holding(self, kubelet, ref):
        """(peer kubelet, digest reference) of another node whose
        containerd holds `ref`'s repository by digest, as the embedded
        mirror finds it; None when no peer does (mirror.py)."""
        for peer in self.kubelets:
            if peer is kubelet:
                continue
            source = digest_ref(peer.host.images(), ref)
            if source:
                return peer, source
        return None

    def logs(self, pod, container, previous):
        """The log as the pod's kubelet holds it (an unbound pod's answer
        comes from any kubelet: it has no host)."""
        kubelet = self.bound_kubelet(pod) or self.kubelets[0]
        return kubelet.logs(pod, container, previous)

    def allocatable_changed_at(self):
        times = [k.allocatable_changed_at for k in self.kubelets
                 if k.allocatable_changed_at is not None]
        return max(times) if times else None

    # ------------------------------------------------------------ set-up

    def bootstrap(self):
        for name in ("default", "kube-system", "kube-public",
                     "kube-node-lease"):
            self.registry.create(NAMESPACES, None,
                                 {"metadata": {"name": name}}, "k3s")
        for kubelet in self.kubelets:  # each registers its Node
            self.registry.create(NODES, None, kubelet.node_object(), "k3s")
        if self.k3s_runtime_classes:
            # The deploy controller of the first server applies them.
            server = next((k for k in self.kubelets if k.opts.server),
                          self.kubelets[0])
            for name, handler in K3S_RUNTIME_CLASSES.items():
                self.registry.create(RUNTIMECLASSES, None, {
                    "metadata": {"name": name, "labels": {
                        "objectset.rio.cattle.io/hash": "k3s-runtimes"}},
                    "handler": handler}, "deploy@" + server.node_name)
        self.tick()

    # -------------------------------------------------------------- loop

    def run_forever(self, stop):
        """Ticks after each write, when a timer of a pod falls due, and when
        a host changes (k3s re-rendered containerd's config, the driver
        came or went); otherwise it sleeps."""
        seen_hosts = None
        while not stop.is_set():
            timeout = min(max(self.next_due - time.time(), 0.0), IDLE_SECONDS)
            woken = self.wake.wait(timeout)
            self.wake.clear()
            hosts = [k.host.fingerprint() for k in self.kubelets]
            if not woken and hosts == seen_hosts and \
                    time.time() < self.next_due:
                continue
            seen_hosts = hosts
            try:
                self.tick()
            except Exception:  # keep the cluster alive; the log shows it
                traceback.print_exc()

    def tick(self):
        # Config files are read outside the store lock.
        for kubelet in self.kubelets:
            kubelet.read_host()
        with self.store.lock:
            self.now = time.time()
            self.recorder.now = self.now
            self.next_due = self.now + IDLE_SECONDS
            for kubelet in self.kubelets:
                kubelet.start_tick(self.now)
            self.sync_namespaces()
            self.daemonsets.sync()
            self.collect_garbage()
            self.scheduler.schedule()
            for kubelet in self.kubelets:
                kubelet.run_pods()
                kubelet.sync_node()
                self.due(kubelet.next_due)
            self.daemonsets.sync_status()

    def due(self, when):
        """Asks for a tick at `when`."""
        if when is not None and when > self.now:
            self.next_due = min(self.next_due, when)

    # ------------------------------------------------------ helpers

    def event(self, obj, kind, reason, message, component, field_path=None):
        self.recorder.record(obj, kind, reason, message, component,
                             field_path)

    def set_condition(self, conditions, kind, status, reason=None,
                      message=None):
        set_condition(conditions, kind, status, self.now, reason, message)

    # ------------------------------------------------------ API hooks

    def admit(self, res, obj):
        """Admission for new Pods: RuntimeClass and PriorityClass plugins."""
        if res.kind != "Pod":
            return
        metadata = obj["metadata"]
        name = metadata.get("generateName") or metadata.get("name", "")
        spec = obj.get("spec", {})
        rc_name = spec.get("runtimeClassName")
        if rc_name and self.store.get(RUNTIMECLASSES, None, rc_name) is None:
            raise errors.forbidden(
                res, name, f'pod rejected: RuntimeClass "{rc_name}" not found')
        priority_class = spec.get("priorityClassName")
        if priority_class and priority_class not in PRIORITY_CLASSES:
            raise errors.forbidden(res, name, f"no PriorityClass with name "
                                   f"{priority_class} was found")

    def graceful_delete(self, res, obj, grace):
        """A bound pod is only marked: its kubelet stops it and removes it."""
        if res.kind == "Namespace":
            return True
        if res.kind != "Pod" or grace == 0:
            return False
        return self.bound_kubelet(obj) is not None

    # ---------------------------------------------------- controllers

    def sync_namespaces(self):
        """kube-root-ca.crt in every namespace; finish deleting namespaces."""
        for ns in self.store.list(NAMESPACES):
            name = ns["metadata"]["name"]
            if ns["metadata"].get("deletionTimestamp"):
                self._finish_namespace(ns)
            elif self.store.get(CONFIGMAPS, name, "kube-root-ca.crt") is None:
                self.registry.create(CONFIGMAPS, name, {
                    "metadata": {"name": "kube-root-ca.crt", "annotations": {
                        "kubernetes.io/description": ROOT_CA_DESCRIPTION}},
                    "data": {"ca.crt": self.ca_pem}},
                    "root-ca-cert-publisher")

    def _finish_namespace(self, ns):
        name = ns["metadata"]["name"]
        for res in (PODS, DAEMONSETS, CONFIGMAPS, EVENTS):
            for obj in self.store.list(res, name):
                if res is PODS:
                    kubelet = self.bound_kubelet(obj)
                    if kubelet is not None:
                        kubelet.stop_pod(obj, pod_gone=True)
                self.store.remove(res, obj)
        self.store.remove(NAMESPACES, ns)

    def collect_garbage(self):
        """Pods whose controlling DaemonSet is gone are deleted."""
        owners = {ds["metadata"]["uid"] for ds in self.store.list(DAEMONSETS)}
        for pod in self.store.list(PODS):
            ref = controller_of(pod)
            if ref and ref.get("kind") == "DaemonSet" and \
                    ref.get("uid") not in owners and \
                    not pod["metadata"].get("deletionTimestamp"):
                self.registry.delete(PODS, pod["metadata"]["namespace"],
                                     pod["metadata"]["name"], {})
