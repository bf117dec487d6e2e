"""What runs inside the containers: the NVIDIA device plugin (v0.19.3's
config rules and log lines) and a CUDA vectorAdd smoke test.

Each function decides, at container start, what the process will do:
its log, whether and when it exits, and which resources it registers.
"""

import json
import time
from dataclasses import dataclass, field

import yaml

PLUGIN_IMAGE_MARK = "k8s-device-plugin"
GPU_RESOURCE = "nvidia.com/gpu"

VECTOR_ADD_OK = ("[Vector addition of 50000 elements]\n"
                 "Copy input data from the host memory to the CUDA device\n"
                 "CUDA kernel launch with 196 blocks of 256 threads\n"
                 "Copy output data from the CUDA device to the host memory\n"
                 "Test PASSED\n"
                 "Done\n")
VECTOR_ADD_NO_GPU = ("[Vector addition of 50000 elements]\n"
                     "Failed to allocate device vector A (error code CUDA "
                     "driver version is insufficient for CUDA runtime "
                     "version)!\n")
NVML_MISSING = ("could not load NVML library: libnvidia-ml.so.1: cannot open "
                "shared object file: No such file or directory")


@dataclass
class Launch:
    """What a started container does."""
    log: str
    exit_code: int = None  # None: runs until stopped
    exit_after: float = 0.0
    # (resource name, replicas per GPU), registered after the start delay.
    resources: list = field(default_factory=list)
    fail_requests_greater_than_one: bool = False
    devices: list = None  # the device IDs a workload was allocated


class ConfigError(Exception):
    pass


def klog(level, source, message):
    now = time.time()
    stamp = time.strftime("%m%d %H:%M:%S", time.gmtime(now))
    micros = int((now % 1) * 1e6)
    return f"{level}{stamp}.{micros:06d}       1 {source}] {message}\n"


def is_plugin(container):
    return PLUGIN_IMAGE_MARK in container.get("image", "")


def gpu_request(container):
    """(resource, count) when the container asks for an NVIDIA GPU."""
    limits = (container.get("resources") or {}).get("limits") or {}
    for name, value in limits.items():
        if name.startswith(GPU_RESOURCE):
            return name, int(str(value))
    return None


def parse_config(text):
    """The plugin's config (YAML or JSON) as v0.19.3 reads it: returns
    (resources [(name, replicas)], fail_requests_greater_than_one,
    warnings). Unknown fields are ignored (sigs.k8s.io/yaml is not strict),
    so `renameByDefault` under `flags` silently does nothing."""
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"unmarshal error: error converting YAML to JSON: "
                          f"yaml: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError("unmarshal error: error unmarshaling JSON: while "
                          "decoding JSON: json: cannot unmarshal string into "
                          "Go value of type v1.Config")
    version = data.get("version") or "v1"
    if version != "v1":
        raise ConfigError(f"unknown version: {version}")
    sharing = data.get("sharing") or {}
    slicing = sharing.get("timeSlicing") if isinstance(sharing, dict) else None
    if slicing is None:
        return [(GPU_RESOURCE, 1)], False, []
    return _time_slicing(slicing)


def _decode_error(message):
    return ConfigError("unmarshal error: error unmarshaling JSON: while "
                       "decoding JSON: " + message)


def _time_slicing(slicing):
    if not isinstance(slicing, dict):
        raise _decode_error("json: cannot unmarshal into Go value of type "
                            "v1.TimeSlicing")
    rename = slicing.get("renameByDefault", False)
    fail_gt1 = slicing.get("failRequestsGreaterThanOne", False)
    for flag in (rename, fail_gt1):
        if not isinstance(flag, bool):
            raise _decode_error(f"json: cannot unmarshal {type(flag).__name__}"
                                f" into Go value of type bool")
    entries = slicing.get("resources")
    if not entries:
        raise _decode_error("no resources specified")
    replicas, warnings = 1, []
    for entry in entries:
        if not isinstance(entry, dict) or "name" not in entry:
            raise _decode_error("no resource name specified")
        if "replicas" not in entry:
            raise _decode_error("no replicas specified")
        count = entry["replicas"]
        if not isinstance(count, int) or isinstance(count, bool):
            raise _decode_error(f"json: cannot unmarshal "
                                f"{type(count).__name__} into Go value of "
                                f"type int")
        if count < 2:
            raise _decode_error("number of replicas must be >= 2")
        if entry.get("rename"):
            warnings.append("Setting the 'rename' field in sharing."
                            "timeSlicing.resources is not yet supported in "
                            "the config. Ignoring...")
        if entry["name"] == GPU_RESOURCE:
            replicas = count
    shared = rename and replicas > 1
    name = GPU_RESOURCE + ".shared" if shared else GPU_RESOURCE
    return [(name, replicas)], fail_gt1, warnings


def _header():
    log = klog("I", "main.go:235", '"Starting NVIDIA Device Plugin" '
               'version="v0.19.3"')
    log += klog("I", "main.go:238", "Starting FS watcher for "
                "/var/lib/kubelet/device-plugins")
    log += klog("I", "main.go:245", "Starting OS watcher.")
    log += klog("I", "main.go:260", "Starting Plugins.")
    log += klog("I", "main.go:317", "Loading configuration.")
    return log


def plugin_launch(env, config_text, runtime, driver_loaded, gpus):
    """The device plugin starting in a container.

    env: the container's literal env; config_text: the content of
    CONFIG_FILE as mounted, None when CONFIG_FILE is unset, False when it is
    set but no volume provides the file; runtime: the containerd runtime
    the pod runs under; gpus: GPUs NVML would see."""
    fail_on_init = env.get("FAIL_ON_INIT_ERROR", "true").lower() != "false"
    log = _header()
    try:
        if config_text is False:
            raise ConfigError("error opening config file: open "
                              f"{env.get('CONFIG_FILE')}: no such file or "
                              "directory")
        if config_text is None:
            resources, fail_gt1, warnings = [(GPU_RESOURCE, 1)], False, []
        else:
            resources, fail_gt1, warnings = parse_config(config_text)
    except ConfigError as err:
        log += klog("E", "main.go:173", "error starting plugins: unable to "
                    "load config: unable to finalize config: unable to parse "
                    f"config file: error parsing config file: {err}")
        return Launch(log, exit_code=1, exit_after=0.05)
    log += klog("I", "main.go:353", "\nRunning with config:\n" + json.dumps(
        {"version": "v1", "flags": {"failOnInitError": fail_on_init},
         "resources": {"gpus": [{"pattern": "*", "name": GPU_RESOURCE}]},
         "sharing": {"timeSlicing": {"resources": [
             {"name": r, "replicas": n} for r, n in resources if n > 1]}}},
        indent=2) + "\n")
    for warning in warnings:
        log += klog("W", "config.go:88", warning)
    log += klog("I", "main.go:356", "Retrieving plugins.")
    if not runtime.nvidia or not driver_loaded:
        return _no_nvml(log, fail_on_init)
    if gpus <= 0:
        log += klog("I", "main.go:381", "No devices found. Waiting "
                    "indefinitely.")
        return Launch(log)
    for name, _ in resources:
        socket = name.replace("nvidia.com/", "nvidia-").replace(".", "-")
        log += klog("I", "server.go:195", f"Starting GRPC server for '{name}'")
        log += klog("I", "server.go:139", f"Starting to serve '{name}' on "
                    f"/var/lib/kubelet/device-plugins/{socket}.sock")
        log += klog("I", "server.go:146", f"Registered device plugin for "
                    f"'{name}' with Kubelet")
    return Launch(log, resources=resources,
                  fail_requests_greater_than_one=fail_gt1)


def _no_nvml(log, fail_on_init):
    """Under runc (no runtimeClassName) the container has no driver
    libraries: NVML cannot load and the plugin finds no devices."""
    log += klog("I", "factory.go:104", f"Detected non-NVML platform: "
                f"{NVML_MISSING}")
    log += klog("I", "factory.go:104", "Detected non-Tegra platform: "
                "/sys/devices/soc0/family file not found")
    log += klog("E", "factory.go:112", "Incompatible platform detected")
    log += klog("E", "factory.go:113", "If this is a GPU node, did you "
                "configure the NVIDIA Container Toolkit?")
    log += klog("E", "factory.go:114", "You can check the prerequisites at: "
                "https://github.com/NVIDIA/k8s-device-plugin#prerequisites")
    log += klog("E", "factory.go:115", "You can learn how to set the runtime "
                "at: https://github.com/NVIDIA/k8s-device-plugin#quick-start")
    log += klog("E", "factory.go:116", "If this is not a GPU node, you should "
                "set up a toleration or nodeSelector to only deploy this "
                "plugin on GPU nodes")
    if fail_on_init:
        log += klog("E", "main.go:173", "error starting plugins: error "
                    "creating plugin manager: unable to create plugin "
                    "manager: platform detection failed")
        return Launch(log, exit_code=1, exit_after=0.05)
    log += klog("I", "main.go:381", "No devices found. Waiting indefinitely.")
    return Launch(log)


VECTOR_ADD_GPU_FAULT = ("[Vector addition of 50000 elements]\n"
                        "Failed to allocate device vector A (error code "
                        "uncorrectable ECC error encountered)!\n")
# gpunode's proof Pods print the GPU they were given before the sample
# runs (installer/proof/proof_pod.cpp): what `nvidia-smi --query-gpu=uuid`
# prints inside the container, one UUID per line.
PROOF_MARK = "gpunode-proof"


def _shell_script(spec):
    command = (spec.get("command") or []) + (spec.get("args") or [])
    if len(command) >= 3 and command[0] in ("/bin/sh", "sh") and \
            command[1] == "-c":
        return command[2]
    return None


def workload_launch(runtime, driver_loaded, spec=None, uuids=(),
                    faulty=False):
    """A container that asked for a GPU runs CUDA vectorAdd, on the GPUs
    behind `uuids`; `faulty`: one of them fails CUDA."""
    script = _shell_script(spec or {})
    log = ""
    if script is not None and PROOF_MARK in script:
        log = "".join(f"{PROOF_MARK} gpu={u}\n" for u in uuids)
    if not (runtime.nvidia and driver_loaded):
        return Launch(log + VECTOR_ADD_NO_GPU, exit_code=1, exit_after=0.1)
    if faulty:
        return Launch(log + VECTOR_ADD_GPU_FAULT, exit_code=1, exit_after=0.1)
    return Launch(log + VECTOR_ADD_OK, exit_code=0, exit_after=0.1)
