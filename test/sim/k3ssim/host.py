"""What the simulated node reads from its host tree (--root) and its
containerd: the runtime handlers k3s rendered into containerd's config, the
NVIDIA driver, and which images containerd holds.
"""

import glob
import os
import subprocess
import sys
import threading
import time
import tomllib

CONFIG = "var/lib/rancher/k3s/agent/etc/containerd/config.toml"
# Where containerd keeps its runtimes, by config version.
CRI_TABLES = {3: "io.containerd.cri.v1.runtime",
              2: "io.containerd.grpc.v1.cri"}
IMAGE_CACHE_SECONDS = 0.2


def normalize_image(ref):
    """An image reference as containerd names it: docker.io/library/x:latest
    for x."""
    name, digest = (ref.split("@", 1) + [""])[:2]
    first = name.split("/", 1)[0]
    if "/" not in name or not ("." in first or ":" in first
                               or first == "localhost"):
        name = "docker.io/" + (name if "/" in name else "library/" + name)
    if ":" not in name.rsplit("/", 1)[-1] and not digest:
        name += ":latest"
    return f"{name}@{digest}" if digest else name


def _deep_merge(base, extra):
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = value


class Runtime:
    def __init__(self, name, binary, systemd_cgroup):
        self.name = name
        self.binary = binary  # options.BinaryName ("" = runc's default)
        self.systemd_cgroup = systemd_cgroup

    @property
    def nvidia(self):
        """True when containers get GPUs: nvidia-container-runtime*."""
        return os.path.basename(self.binary).startswith(
            "nvidia-container-runtime")


class HostView:
    def __init__(self, root, containerd_socket):
        self.root = root
        self.socket = containerd_socket
        self._config_key = None
        self._config = ({}, "runc")
        self._images = None
        self._images_at = 0.0
        self._lock = threading.Lock()

    def host_path(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def exists(self, path):
        return os.path.exists(self.host_path(path))

    def driver_loaded(self):
        return self.exists("/proc/driver/nvidia/version")

    def fingerprint(self):
        """Changes when what runtimes() or driver_loaded() read changes."""
        try:
            stat = os.stat(self.host_path(CONFIG))
            config = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            config = None
        return config, self._imports_key(), self.driver_loaded()

    def runtimes(self):
        """({name: Runtime}, default runtime name), from k3s's rendered
        config (and its drop-in imports). Without a readable config only
        runc is assumed, as a containerd with built-in defaults has."""
        path = self.host_path(CONFIG)
        try:
            stat = os.stat(path)
            key = (stat.st_mtime_ns, stat.st_size, self._imports_key())
        except OSError:
            return {"runc": Runtime("runc", "", True)}, "runc"
        if key != self._config_key:
            self._config_key = key
            self._config = self._read_config(path)
        return self._config

    def _imports_key(self):
        pattern = ("var/lib/rancher/k3s/agent/etc/containerd/"
                   "config*.toml.d/*.toml")
        return tuple(sorted(glob.glob(self.host_path(pattern))))

    def _read_config(self, path):
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
            for pattern in data.get("imports", []):
                for extra in sorted(glob.glob(self.host_path(pattern))):
                    with open(extra, "rb") as f:
                        _deep_merge(data, tomllib.load(f))
        except (OSError, tomllib.TOMLDecodeError) as err:
            print(f"k3s_sim: containerd config unreadable: {err}",
                  file=sys.stderr)
            return {"runc": Runtime("runc", "", True)}, "runc"
        table = CRI_TABLES.get(data.get("version", 1), CRI_TABLES[2])
        cri = data.get("plugins", {}).get(table, {}).get("containerd", {})
        runtimes = {}
        for name, spec in cri.get("runtimes", {}).items():
            options = spec.get("options", {}) if isinstance(spec, dict) else {}
            runtimes[name] = Runtime(name, options.get("BinaryName", ""),
                                     bool(options.get("SystemdCgroup", False)))
        return runtimes, cri.get("default_runtime_name", "runc")

    def forget_images(self):
        """The next images() asks containerd again (an import happened)."""
        with self._lock:
            self._images_at = 0.0

    def images(self):
        """The image names in containerd's k8s.io namespace, or None when no
        containerd is attached (then every image counts as present)."""
        if not self.socket:
            return None
        with self._lock:
            if time.time() - self._images_at < IMAGE_CACHE_SECONDS:
                return self._images
            try:
                out = subprocess.run(
                    ["ctr", "--address", self.socket, "-n", "k8s.io", "images",
                     "ls", "-q"], capture_output=True, text=True, timeout=10,
                    check=True).stdout
                self._images = {line.strip() for line in out.splitlines()
                                if line.strip()}
            except (OSError, subprocess.SubprocessError) as err:
                print(f"k3s_sim: ctr images ls failed: {err}", file=sys.stderr)
                self._images = self._images or set()
            self._images_at = time.time()
            return self._images
