"""One node of k3s: its kubelet (pod lifecycle, logs, node status and
device-plugin registrations) and the NVIDIA device plugin running on it,
on the node's own host tree and containerd. The cluster's controllers and
the loop that ticks every node are in cluster.py.
"""

import copy
import hashlib
from dataclasses import dataclass

from . import apierrors as errors
from . import devices
from .conditions import set_condition
from .daemonset import controller_of
from .host import HostView, normalize_image
from .mirror import PeerPull
from .objects import get_path
from .plugin import (Launch, gpu_request, is_plugin, plugin_launch,
                     workload_launch)
from .registry import now_iso
from .resources import BY_KIND, K3S_VERSION

NODES = BY_KIND["Node"]
PODS = BY_KIND["Pod"]
CONFIGMAPS = BY_KIND["ConfigMap"]
RUNTIMECLASSES = BY_KIND["RuntimeClass"]

# The first node's address; node i (0-based) gets .10+i, pods 10.42.i.0/24.
NODE_IP_BASE = "192.168.100."
NODE_IP_FIRST = 10
CAPACITY_GRACE_SECONDS = 300.0  # kubelet's endpoint grace period
IDLE_SECONDS = 0.5  # host re-check interval when nothing is pending
RETRY_SECONDS = 0.2  # how soon the kubelet retries a blocked pod
# A runtime whose SystemdCgroup differs from runc's (k3s's cgroup driver)
# gets its containers killed after a few seconds (k3s #7130).
CGROUP_KILL_SECONDS = 3.0
BACKOFF_MAX_SECONDS = 300.0


@dataclass
class NodeOptions:
    name: str
    root: str
    containerd_socket: str
    gpus: int
    plugin_start_ms: int
    server: bool = True  # a k3s server (control-plane labels) or an agent
    embedded_registry_mirror: bool = False  # pulls from peers (mirror.py)
    index: int = 0  # the node's place in the cluster: its IP and pod CIDR


@dataclass
class ContainerRun:
    """One container as the kubelet runs it."""
    name: str
    state: str = "waiting"  # waiting | running | terminated
    reason: str = "ContainerCreating"
    message: str = ""
    started_at: float = None
    finished_at: float = None
    exit_code: int = None
    restarts: int = 0
    last_terminated: dict = None
    container_id: str = ""
    image_id: str = ""
    next_start: float = 0.0  # end of a restart back-off
    exit_at: float = None
    exit_code_due: int = None  # what the process exits with at exit_at
    ready_at: float = None
    register_at: float = None
    launch: object = None  # plugin.Launch of the current process
    log: str = ""
    previous_log: str = None
    pull_failures: int = 0
    peer_pull: object = None  # mirror.PeerPull that brought its image
    # The device IDs the kubelet's device manager allocated to the running
    # process (devices.py); freed when it ends.
    devices: list = None


@dataclass
class PodRun:
    uid: str
    containers: dict
    sandbox: bool = False
    runtime: object = None
    trouble: bool = False  # blocked or crashed: not "starting cleanly"
    first_seen: float = 0.0
    ip: str = ""


@dataclass
class Registration:
    """A device plugin's resource registered with the kubelet."""
    resource: str
    replicas: int
    gpus: int
    pod_uid: str
    ds_uid: str
    container: str
    at: float
    fail_gt1: bool = False
    ended: bool = False  # the plugin process is gone
    pod_gone: bool = False  # ... because its pod was deleted


def _pull_error(ref):
    """containerd's words for a pull with no DNS (no network)."""
    host, path = ref.split("/", 1)
    name, tag = path.rsplit(":", 1) if ":" in path else (path, "latest")
    return (f"failed to pull and unpack image \"{ref}\": failed to resolve "
            f"reference \"{ref}\": failed to do request: Head \"https://{host}"
            f"/v2/{name}/manifests/{tag}\": dial tcp: lookup {host}: no such "
            f"host")


class NodeModel:
    def __init__(self, cluster, options):
        self.cluster = cluster
        self.registry = cluster.registry
        self.store = cluster.store
        self.opts = options
        self.node_name = options.name
        self.ip = f"{NODE_IP_BASE}{NODE_IP_FIRST + options.index}"
        self.host = HostView(options.root, options.containerd_socket)
        self.plugin_start = options.plugin_start_ms / 1000.0
        self.gpus = options.gpus
        self.healthy = options.gpus
        # Fault injection: GPUs (by index) on which CUDA fails, and how the
        # kubelet picks among free device IDs (devices.py).
        self.failing_gpus = set()
        self.allocation = devices.DISTRIBUTED
        self.runs = {}  # pod uid -> PodRun
        self.registrations = []
        self.extended = {}  # resource -> {"capacity": str, "dropped_at": t}
        self.allocatable_changed_at = None
        self.now = 0.0
        self.runtimes, self.default_runtime = {}, "runc"
        self.driver = False
        self.host_read = ({}, "runc", False)
        self.next_due = 0.0
        self.next_ip = 2
        self.pulls = {}  # image ref -> mirror.PeerPull

    def node_object(self):
        base = {"cpu": "8", "ephemeral-storage": "102626232Ki",
                "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": "32Gi",
                "pods": "110"}
        stamp = now_iso()
        labels = {
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/instance-type": "k3s",
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": self.node_name,
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": "k3s"}
        if self.opts.server:  # k3s's servers label themselves; agents not
            labels["node-role.kubernetes.io/control-plane"] = "true"
            labels["node-role.kubernetes.io/master"] = "true"
        cidr = f"10.42.{self.opts.index}.0/24"
        return {
            "metadata": {
                "name": self.node_name,
                "labels": dict(sorted(labels.items())),
                "annotations": {
                    "k3s.io/hostname": self.node_name,
                    "k3s.io/internal-ip": self.ip,
                    "node.alpha.kubernetes.io/ttl": "0",
                    "volumes.kubernetes.io/controller-managed-attach-detach":
                        "true"}},
            "spec": {"podCIDR": cidr, "podCIDRs": [cidr],
                     "providerID": f"k3s://{self.node_name}"},
            "status": {
                "capacity": dict(base), "allocatable": dict(base),
                "conditions": [
                    self._node_condition("MemoryPressure", "False",
                                         "KubeletHasSufficientMemory",
                                         "kubelet has sufficient memory "
                                         "available", stamp),
                    self._node_condition("DiskPressure", "False",
                                         "KubeletHasNoDiskPressure",
                                         "kubelet has no disk pressure",
                                         stamp),
                    self._node_condition("PIDPressure", "False",
                                         "KubeletHasSufficientPID",
                                         "kubelet has sufficient PID "
                                         "available", stamp),
                    self._node_condition("Ready", "True", "KubeletReady",
                                         "kubelet is posting ready status",
                                         stamp)],
                "addresses": [{"type": "InternalIP", "address": self.ip},
                              {"type": "Hostname", "address": self.node_name}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "machineID": hashlib.md5(
                        self.node_name.encode()).hexdigest(),
                    "systemUUID": "4c4c4544-0042-3510-8052-b7c04f4e3332",
                    "bootID": "2f7c1a8e-6b1d-4d0e-9c55-3f0e7e5b9a10",
                    "kernelVersion": "6.1.0-31-amd64",
                    "osImage": "Debian GNU/Linux 12 (bookworm)",
                    "containerRuntimeVersion": "containerd://2.1.5-k3s1",
                    "kubeletVersion": K3S_VERSION,
                    "kubeProxyVersion": "",
                    "operatingSystem": "linux", "architecture": "amd64"},
                "runtimeHandlers": []}}

    @staticmethod
    def _node_condition(kind, status, reason, message, stamp):
        return {"type": kind, "status": status, "lastHeartbeatTime": stamp,
                "lastTransitionTime": stamp, "reason": reason,
                "message": message}

    def due(self, when):
        """Asks for a tick at `when` (a pod timer)."""
        if when is not None and when > self.now:
            self.next_due = min(self.next_due, when)

    def set_gpus(self, gpus=None, healthy=None, failing=None,
                 allocation=None):
        with self.store.lock:
            if failing is not None:
                self.failing_gpus = set(failing)
            if allocation is not None:
                if allocation not in devices.ALLOCATIONS:
                    raise ValueError(f"allocation: one of {devices.ALLOCATIONS}")
                self.allocation = allocation
            if gpus is not None:
                self.gpus = gpus
                self.healthy = gpus if healthy is None else healthy
            elif healthy is not None:
                self.healthy = healthy
        self.cluster.wake.set()
        return {"gpus": self.gpus, "healthy": self.healthy,
                "failing": sorted(self.failing_gpus),
                "allocation": self.allocation}


    def read_host(self):
        """Reads the host tree outside the store lock; images are listed
        (with `ctr`) only when a container is about to start."""
        runtimes, default_runtime = self.host.runtimes()
        self.host_read = (runtimes, default_runtime,
                          self.host.driver_loaded())

    def start_tick(self, now):
        self.now = now
        self.next_due = now + IDLE_SECONDS
        self.runtimes, self.default_runtime, self.driver = self.host_read

    def event(self, obj, kind, reason, message, component, field_path=None):
        host = self.node_name if component == "kubelet" else ""
        self.cluster.recorder.record(obj, kind, reason, message, component,
                                     field_path, host)

    def _set_condition(self, conditions, kind, status, reason=None,
                       message=None):
        set_condition(conditions, kind, status, self.now, reason, message)

    def node(self):
        return self.store.get(NODES, None, self.node_name)

    # ------------------------------------------------------------ kubelet

    def run_pods(self):
        seen = set()
        for pod in self.store.list(PODS):
            if pod.get("spec", {}).get("nodeName") != self.node_name:
                continue
            uid = pod["metadata"]["uid"]
            seen.add(uid)
            if pod["metadata"].get("deletionTimestamp"):
                self._finish_deletion(pod)
                continue
            if get_path(pod, ("status", "phase")) in ("Succeeded", "Failed"):
                continue
            run = self.runs.get(uid)
            if run is None:
                failure = self._admission_failure(pod)
                if failure:
                    self._fail_admission(pod, failure)
                    continue
                run = self.runs[uid] = PodRun(uid, {
                    c["name"]: ContainerRun(c["name"])
                    for c in pod["spec"]["containers"]}, first_seen=self.now)
            self._step_pod(pod, run)
            pod["status"] = self._pod_status(pod, run)
            self.registry.save(PODS, pod)
        for uid in list(self.runs):
            if uid not in seen:
                self._forget(uid)

    def _finish_deletion(self, pod):
        """The containers stop and the kubelet removes the pod object."""
        self.stop_pod(pod, pod_gone=True)
        for spec in pod["spec"]["containers"]:
            self.event(pod, "Normal", "Killing",
                       f"Stopping container {spec['name']}", "kubelet",
                       f"spec.containers{{{spec['name']}}}")
        self.store.remove(PODS, pod)

    def _fail_admission(self, pod, message):
        status = pod.setdefault("status", {})
        status.update({"phase": "Failed", "reason": "UnexpectedAdmissionError",
                       "message": message, "startTime": now_iso(self.now)})
        self.registry.save(PODS, pod)
        self.event(pod, "Warning", "UnexpectedAdmissionError", message,
                   "kubelet")

    def stop_pod(self, pod, pod_gone):
        run = self.runs.get(pod["metadata"]["uid"])
        for reg in self.registrations:
            if reg.pod_uid == pod["metadata"]["uid"]:
                reg.ended = True
                reg.pod_gone = pod_gone
        if run:
            for cr in run.containers.values():
                cr.state = "terminated"

    def _forget(self, uid):
        self.runs.pop(uid, None)
        for reg in self.registrations:
            if reg.pod_uid == uid:
                reg.ended = True
                reg.pod_gone = True

    def _step_pod(self, pod, run):
        if not run.sandbox:
            blocker = self._sandbox_blocker(pod)
            if blocker:
                run.trouble = True
                reason, message = blocker
                self.event(pod, "Warning", reason, message, "kubelet")
                self.due(self.now + RETRY_SECONDS)
                return
            run.sandbox = True
            run.ip = f"10.42.{self.opts.index}.{self.next_ip}"
            self.next_ip = self.next_ip % 250 + 2
        for spec in pod["spec"]["containers"]:
            self._step_container(pod, run, run.containers[spec["name"]], spec)
        # "Trouble" is what the kubelet would report as a failing container;
        # the node then stops counting on this pod's plugin coming up.
        run.trouble = any(
            (cr.state == "waiting" and cr.reason != "ContainerCreating")
            or (cr.state == "terminated" and cr.exit_code)
            for cr in run.containers.values())
        for cr in run.containers.values():
            for when in (cr.register_at, cr.exit_at, cr.ready_at):
                self.due(when)
            if cr.state == "waiting":
                self.due(max(cr.next_start, self.now + RETRY_SECONDS))

    def _runtime_for(self, pod):
        rc_name = pod["spec"].get("runtimeClassName")
        handler = self.default_runtime
        if rc_name:
            rc = self.store.get(RUNTIMECLASSES, None, rc_name)
            if rc is None:
                return None, (f"Failed to create pod sandbox: "
                              f"runtimeclass.node.k8s.io \"{rc_name}\" not "
                              f"found")
            handler = rc.get("handler", "")
        runtime = self.runtimes.get(handler)
        if runtime is None:
            return None, (f"Failed to create pod sandbox: rpc error: code = "
                          f"Unknown desc = failed to get sandbox runtime: no "
                          f"runtime for \"{handler}\" is configured")
        if runtime.binary and not self.host.exists(runtime.binary):
            return None, (
                f"Failed to create pod sandbox: rpc error: code = Unknown "
                f"desc = failed to create containerd task: failed to create "
                f"shim task: OCI runtime create failed: unable to retrieve "
                f"OCI runtime error (open /run/k3s/containerd/io.containerd."
                f"runtime.v2.task/k8s.io/{pod['metadata']['uid']}/log.json: "
                f"no such file or directory): fork/exec {runtime.binary}: no "
                f"such file or directory: unknown")
        return runtime, None

    def _sandbox_blocker(self, pod):
        """Volumes first, then the sandbox, as the kubelet's SyncPod does."""
        namespace = pod["metadata"]["namespace"]
        for volume in pod["spec"].get("volumes", []):
            source = volume.get("configMap")
            if source and not source.get("optional") and self.store.get(
                    CONFIGMAPS, namespace, source.get("name")) is None:
                return "FailedMount", (
                    f"MountVolume.SetUp failed for volume \"{volume['name']}\""
                    f" : configmap \"{source.get('name')}\" not found")
        runtime, problem = self._runtime_for(pod)
        if problem:
            return "FailedCreatePodSandBox", problem
        self.runs[pod["metadata"]["uid"]].runtime = runtime
        return None

    def _step_container(self, pod, run, cr, spec):
        if cr.state == "running":
            self._advance_running(pod, run, cr)
            return
        if cr.state == "terminated" and not self._restarts(pod, cr):
            return
        if self.now < cr.next_start:
            return  # CrashLoopBackOff
        problem = self._start_blocker(pod, cr, spec)
        if problem:
            cr.state, cr.reason, cr.message = ("waiting",) + problem[:2]
            if problem[2]:
                self.event(pod, "Warning", problem[3], problem[2], "kubelet",
                           f"spec.containers{{{cr.name}}}")
            return
        self._start_container(pod, run, cr, spec)

    def _restarts(self, pod, cr):
        policy = pod["spec"].get("restartPolicy", "Always")
        return policy == "Always" or (policy == "OnFailure"
                                      and cr.exit_code != 0)

    def _start_blocker(self, pod, cr, spec):
        """(reason, message, event message, event reason) or None."""
        image = spec.get("image", "")
        ref = normalize_image(image)
        policy = spec.get("imagePullPolicy", "IfNotPresent")
        images = self.host.images()  # None: no containerd, all present
        missing = images is not None and (policy == "Always"
                                          or ref not in images)
        # A pull from a peer that just ended is seen through, even when the
        # image list already shows its result.
        if missing or ref in self.pulls:
            via_peer = self._pull_from_peer(pod, cr, image, ref)
            if isinstance(via_peer, tuple):
                return via_peer  # still coming
            missing = missing and via_peer == "none"
        if missing and policy == "Never":
            # pkg/kubelet/images/image_manager.go (EnsureImageExists): no
            # pull is tried; the container waits with ErrImageNeverPull and
            # the event has that reason (events.ErrImageNeverPullPolicy).
            why = (f"Container image \"{image}\" is not present with pull "
                   f"policy of Never")
            return ("ErrImageNeverPull", why, why, "ErrImageNeverPull")
        if missing:
            # An air-gapped node: the registry's name does not even resolve.
            cr.pull_failures += 1
            if cr.pull_failures == 1:
                why = _pull_error(ref)
                return ("ErrImagePull", why,
                        f"Failed to pull image \"{image}\": {why}", "Failed")
            return ("ImagePullBackOff", f"Back-off pulling image \"{image}\"",
                    f"Back-off pulling image \"{image}\"", "BackOff")
        namespace = pod["metadata"]["namespace"]
        for env in spec.get("env", []):
            ref_cm = get_path(env, ("valueFrom", "configMapKeyRef"))
            if ref_cm and not ref_cm.get("optional"):
                cm = self.store.get(CONFIGMAPS, namespace, ref_cm.get("name"))
                if cm is None or ref_cm.get("key") not in cm.get("data", {}):
                    text = (f"configmap \"{ref_cm.get('name')}\" not found"
                            if cm is None else f"couldn't find key "
                            f"{ref_cm.get('key')} in ConfigMap {namespace}/"
                            f"{ref_cm.get('name')}")
                    return ("CreateContainerConfigError", text,
                            f"Error: {text}", "Failed")
        run = self.runs[pod["metadata"]["uid"]]
        wants_gpu = is_plugin(spec) or gpu_request(spec)
        if wants_gpu and run.runtime.nvidia and not self.driver:
            text = ("failed to create containerd task: failed to create shim "
                    "task: OCI runtime create failed: runc create failed: "
                    "unable to start container process: error during "
                    "container init: error running prestart hook #0: exit "
                    "status 1, stdout: , stderr: Auto-detected mode as "
                    "'legacy'\nnvidia-container-cli: initialization error: "
                    "nvml error: driver not loaded: unknown")
            return ("RunContainerError", text, f"Error: {text}", "Failed")
        return None

    def _pull_from_peer(self, pod, cr, image, ref):
        """Through the embedded registry mirror: None once the image is
        here, the waiting state while it comes, "none" when no peer can
        serve it (or the pull failed): then the pull fails as without it."""
        if not self.opts.embedded_registry_mirror:
            return "none"
        pull = self.pulls.get(ref)
        if pull is None:
            found = self.cluster.peer_holding(self, ref)
            if found is None:
                return "none"
            peer, source = found
            pull = self.pulls[ref] = PeerPull(image, ref, source,
                                              peer.host.socket,
                                              self.host.socket)
            self.event(pod, "Normal", "Pulling", f"Pulling image \"{image}\"",
                       "kubelet", f"spec.containers{{{cr.name}}}")
        if pull.running():
            self.due(self.now + RETRY_SECONDS)
            return ("ContainerCreating", "", None, None)
        del self.pulls[ref]
        if not pull.ok:
            return "none"
        self.host.forget_images()
        cr.peer_pull = pull
        return None

    def _start_container(self, pod, run, cr, spec):
        restarting = cr.started_at is not None
        if restarting:
            cr.restarts += 1
            cr.previous_log = cr.log
        cr.state, cr.reason, cr.message = "running", "", ""
        cr.started_at = self.now
        cr.exit_at = cr.ready_at = cr.register_at = None
        cr.container_id = "containerd://" + hashlib.sha256(
            f"{run.uid}/{cr.name}/{cr.restarts}".encode()).hexdigest()
        cr.image_id = normalize_image(spec["image"]).split("@")[0] + \
            "@sha256:" + hashlib.sha256(spec["image"].encode()).hexdigest()
        cr.pull_failures = 0
        field_path = f"spec.containers{{{cr.name}}}"
        if cr.peer_pull is not None:
            self.event(pod, "Normal", "Pulled",
                       cr.peer_pull.pulled_message(self.now), "kubelet",
                       field_path)
            cr.peer_pull = None
        elif not restarting:
            self.event(pod, "Normal", "Pulled", f"Container image "
                       f"\"{spec['image']}\" already present on machine",
                       "kubelet", field_path)
        self.event(pod, "Normal", "Created", f"Created container: {cr.name}",
                   "kubelet", field_path)
        self.event(pod, "Normal", "Started", f"Started container {cr.name}",
                   "kubelet", field_path)
        launch = self._launch(pod, run, spec)
        cr.launch = launch
        cr.devices = launch.devices
        cr.log = launch.log
        cr.exit_code_due = launch.exit_code
        if launch.exit_code is not None:
            cr.exit_at = self.now + launch.exit_after
        if self._cgroup_mismatch(run.runtime) and (
                cr.exit_at is None
                or cr.exit_at > self.now + CGROUP_KILL_SECONDS):
            cr.exit_at = self.now + CGROUP_KILL_SECONDS
            cr.exit_code_due = 137  # SIGKILL
        if launch.exit_code is None:
            cr.ready_at = self.now + (self.plugin_start if is_plugin(spec)
                                      else 0)
        if launch.resources:
            cr.register_at = self.now + self.plugin_start

    def _launch(self, pod, run, spec):
        if is_plugin(spec):
            env = {e["name"]: str(e.get("value", "")) for e in
                   spec.get("env", []) if "name" in e}
            config = self._mounted_file(pod, spec, env.get("CONFIG_FILE"))
            return plugin_launch(env, config, run.runtime, self.driver,
                                 self.gpus)
        request = gpu_request(spec)
        if request:
            held = [d for r in self.runs.values()
                    for c in r.containers.values()
                    if c.state == "running" and c.devices for d in c.devices]
            reg = self._live_registrations().get(request[0])
            ids = devices.allocate(
                devices.device_ids(self.node_name, self.healthy,
                                   reg.replicas if reg else 1),
                held, request[1], self.allocation)
            launch = workload_launch(
                run.runtime, self.driver, spec,
                [devices.uuid_of(i) for i in ids],
                any(devices.index_of(self.node_name, i) in self.failing_gpus
                    for i in ids))
            launch.devices = ids
            return launch
        return Launch("")  # any other container runs, silently, until stopped

    def _admission_failure(self, pod):
        """The device plugin refuses to allocate more than one shared slot
        when failRequestsGreaterThanOne is set: the kubelet fails the pod."""
        live = self._live_registrations()
        for spec in pod["spec"]["containers"]:
            request = gpu_request(spec)
            reg = live.get(request[0]) if request else None
            if reg is not None and reg.fail_gt1 and request[1] > 1:
                return (f"Allocate failed due to rpc error: code = Unknown "
                        f"desc = request for '{request[0]}: {request[1]}' too "
                        f"large: maximum request size for shared resources "
                        f"is 1, which is unexpected")
        return None

    def _cgroup_mismatch(self, runtime):
        runc = self.runtimes.get("runc")
        return runc is not None and runtime is not None and \
            runtime.systemd_cgroup != runc.systemd_cgroup

    def _mounted_file(self, pod, spec, path):
        """The content of `path` as the container sees it, read now (the
        plugin reads its config once, at start): None when path is None,
        False when no configMap volume provides it."""
        if not path:
            return None
        volumes = {v["name"]: v for v in pod["spec"].get("volumes", [])}
        for mount in spec.get("volumeMounts", []):
            base = mount.get("mountPath", "").rstrip("/") + "/"
            if not path.startswith(base):
                continue
            source = volumes.get(mount.get("name"), {}).get("configMap")
            if not source:
                continue
            relative = path[len(base):]
            key = relative
            for item in source.get("items") or []:
                if item.get("path") == relative:
                    key = item.get("key")
            cm = self.store.get(CONFIGMAPS, pod["metadata"]["namespace"],
                                source.get("name"))
            if cm is not None and key in cm.get("data", {}):
                return cm["data"][key]
        return False

    def _advance_running(self, pod, run, cr):
        if cr.register_at is not None and self.now >= cr.register_at:
            self._register(pod, cr)
            cr.register_at = None
        if cr.exit_at is not None and self.now >= cr.exit_at:
            self._exit_container(pod, run, cr)

    def _register(self, pod, cr):
        ref = controller_of(pod) or {}
        ds_uid = ref.get("uid", "")
        self.registrations = [
            r for r in self.registrations
            if not (r.ended and (r.ds_uid == ds_uid and ds_uid
                                 or r.pod_uid == pod["metadata"]["uid"]))]
        for name, replicas in cr.launch.resources:
            self.registrations.append(Registration(
                name, replicas, self.gpus, pod["metadata"]["uid"], ds_uid,
                cr.name, self.now,
                cr.launch.fail_requests_greater_than_one))

    def _exit_container(self, pod, run, cr):
        code = cr.exit_code_due
        cr.exit_code = code
        cr.finished_at = self.now
        cr.exit_at = cr.register_at = cr.ready_at = None
        for reg in self.registrations:
            if reg.pod_uid == run.uid and reg.container == cr.name:
                reg.ended = True
        terminated = {"exitCode": code,
                      "reason": "Completed" if code == 0 else "Error",
                      "startedAt": now_iso(cr.started_at),
                      "finishedAt": now_iso(self.now),
                      "containerID": cr.container_id}
        cr.last_terminated = terminated
        if not self._restarts(pod, cr):
            cr.state = "terminated"
            return
        backoff = min(10.0 * (2 ** cr.restarts), BACKOFF_MAX_SECONDS)
        cr.next_start = self.now + backoff
        cr.state, cr.reason = "waiting", "CrashLoopBackOff"
        pod_ref = (f"{pod['metadata']['name']}_{pod['metadata']['namespace']}"
                   f"({pod['metadata']['uid']})")
        cr.message = (f"back-off {int(backoff)}s restarting failed "
                      f"container={cr.name} pod={pod_ref}")
        self.event(pod, "Warning", "BackOff", f"Back-off restarting failed "
                   f"container {cr.name} in pod {pod_ref}", "kubelet",
                   f"spec.containers{{{cr.name}}}")

    # ------------------------------------------------------- pod status

    def _container_status(self, cr, spec):
        status = {"name": cr.name, "image": spec["image"],
                  "imageID": cr.image_id, "ready": False,
                  "restartCount": cr.restarts, "started": False,
                  "lastState": {"terminated": cr.last_terminated}
                  if cr.last_terminated and cr.state != "terminated" else {}}
        if cr.state == "running":
            status["state"] = {"running": {
                "startedAt": now_iso(cr.started_at)}}
            status["started"] = True
            status["ready"] = cr.ready_at is not None and \
                self.now >= cr.ready_at
        elif cr.state == "terminated" and cr.last_terminated:
            status["state"] = {"terminated": cr.last_terminated}
        else:
            waiting = {"reason": cr.reason}
            if cr.message:
                waiting["message"] = cr.message
            status["state"] = {"waiting": waiting}
        if cr.container_id:
            status["containerID"] = cr.container_id
        return status

    def _pod_status(self, pod, run):
        status = copy.deepcopy(pod.get("status", {}))
        specs = pod["spec"]["containers"]
        statuses = [self._container_status(run.containers[s["name"]], s)
                    for s in specs]
        states = [run.containers[s["name"]] for s in specs]
        status["phase"] = self._phase(states)
        all_ready = all(s["ready"] for s in statuses)
        conditions = status.setdefault("conditions", [])
        self._set_condition(conditions, "PodReadyToStartContainers",
                            "True" if run.sandbox else "False")
        self._set_condition(conditions, "Initialized", "True")
        not_ready = None if all_ready else "ContainersNotReady"
        names = ", ".join(s["name"] for s in statuses if not s["ready"])
        message = (f"containers with unready status: [{names}]"
                   if not all_ready else None)
        if status["phase"] in ("Succeeded", "Failed"):
            not_ready, message = "PodCompleted", None
        for kind in ("Ready", "ContainersReady"):
            self._set_condition(conditions, kind,
                                "True" if all_ready else "False", not_ready,
                                message)
        self._set_condition(conditions, "PodScheduled", "True")
        order = ["PodReadyToStartContainers", "Initialized", "Ready",
                 "ContainersReady", "PodScheduled"]
        conditions.sort(key=lambda c: order.index(c["type"])
                        if c["type"] in order else len(order))
        status["hostIP"] = self.ip
        status["hostIPs"] = [{"ip": self.ip}]
        if run.ip:
            status["podIP"] = run.ip
            status["podIPs"] = [{"ip": run.ip}]
        status.setdefault("startTime", now_iso(run.first_seen))
        status["containerStatuses"] = statuses
        return status

    @staticmethod
    def _phase(containers):
        if all(c.state == "terminated" for c in containers):
            failed = any(c.exit_code != 0 for c in containers)
            return "Failed" if failed else "Succeeded"
        if any(c.started_at is not None for c in containers):
            return "Running"
        return "Pending"

    # ---------------------------------------------------------- node

    def _live_registrations(self):
        best = {}
        for reg in self.registrations:
            # Like kubelet's device manager: a plugin that stopped (its pod
            # deleted, e.g. by a rollout) takes its devices with it at once;
            # the resource reads 0 until a plugin registers again.
            live = not reg.ended
            if live and (reg.resource not in best
                         or reg.at >= best[reg.resource].at):
                best[reg.resource] = reg
        return best

    def sync_node(self):
        node = self.node()
        if node is None:
            return
        status = node["status"]
        for reg in self.registrations:
            self.extended.setdefault(reg.resource, {"capacity": "0",
                                                    "dropped_at": None})
        live = self._live_registrations()
        for name, record in self.extended.items():
            reg = live.get(name)
            if reg is not None:
                record["capacity"] = str(reg.gpus * reg.replicas)
                record["dropped_at"] = None
                allocatable = str(min(self.healthy, reg.gpus) * reg.replicas)
            else:
                if record["dropped_at"] is None:
                    record["dropped_at"] = self.now
                if self.now - record["dropped_at"] > CAPACITY_GRACE_SECONDS:
                    record["capacity"] = "0"
                else:
                    self.due(record["dropped_at"] + CAPACITY_GRACE_SECONDS)
                allocatable = "0"
            status["capacity"][name] = record["capacity"]
            if status["allocatable"].get(name) != allocatable:
                self.allocatable_changed_at = self.now
            status["allocatable"][name] = allocatable
        status["runtimeHandlers"] = [
            {"name": name, "features": {"recursiveReadOnlyMounts": True,
                                        "userNamespaces": True}}
            for name in sorted(set(self.runtimes) | {""})]
        self.registry.save(NODES, node)

    # ------------------------------------------------------------ logs

    def logs(self, pod, container, previous):
        """(text) or raises the Status the real log endpoint answers."""
        name = pod["metadata"]["name"]
        names = [c["name"] for c in pod["spec"]["containers"]]
        if not container:
            if len(names) > 1:
                raise errors.bad_request(
                    f"a container name must be specified for pod {name}, "
                    f"choose one of: [{' '.join(names)}]")
            container = names[0]
        if container not in names:
            raise errors.bad_request(f"container {container} is not valid for "
                                     f"pod {name}")
        if not pod["spec"].get("nodeName"):
            raise errors.bad_request(f"pod {name} does not have a host "
                                     f"assigned")
        run = self.runs.get(pod["metadata"]["uid"])
        cr = run.containers.get(container) if run else None
        if previous:
            if cr is None or cr.previous_log is None:
                raise errors.bad_request(f"previous terminated container "
                                         f"\"{container}\" in pod \"{name}\" "
                                         f"not found")
            return cr.previous_log
        if cr is None or cr.started_at is None:
            reason = cr.reason if cr else "ContainerCreating"
            if reason in ("ErrImagePull", "ImagePullBackOff"):
                reason = "trying and failing to pull image"
            raise errors.bad_request(f"container \"{container}\" in pod "
                                     f"\"{name}\" is waiting to start: "
                                     f"{reason}")
        return cr.log
