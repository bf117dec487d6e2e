#!/usr/bin/env python3
"""A simulated k3s cluster for gpunode's tests (no kube-apiserver can run
here): one node, or several behind one API server.

It serves, over HTTPS with client-certificate auth (the user is the
certificate's CN, its groups the O values; the Node authorizer and
NodeRestriction govern kubelet identities, k3ssim/auth.py), the parts of
kube-apiserver that gpunode and kubectl use (discovery, GET/LIST/WATCH,
create/update/patch/server-side apply/delete, pod logs, Status errors), and
runs a model of the cluster behind it: scheduler, DaemonSet controller and,
per node, a kubelet and the NVIDIA device plugin, which advertises GPUs x
replicas only when the real preconditions hold. A plain-HTTP control port on
loopback reads counters and injects faults (k3ssim/control.py lists them).

usage: k3s_sim.py --dir DIR --root HOSTROOT [--containerd-socket SOCK]
                  [--gpus N] [--node NAME] [--plugin-start-ms MS]
                  [--parent-pid PID] [--k3s-runtime-classes]
       k3s_sim.py --dir DIR --nodes-json FILE [--parent-pid PID] ...

--nodes-json FILE: the cluster's nodes, one API server for all of them:
[{"name", "root", "containerd_socket", "gpus", "server": bool,
  "plugin_start_ms", "embedded_registry_mirror": bool}, ...]; the first
is the default node of the control port's knobs. Without it, --root and
the other node options make the single server node of old.

DIR holds ca.pem, server.pem, server-key.pem and client-ca.pem; once both
ports listen, DIR/ready.json is written (atomically):
{"port": P, "control_port": C, "pid": PID}.
The simulator exits on SIGTERM and when its parent (--parent-pid) is gone.
"""

import argparse
import json
import os
import signal
import sys
import threading
import time

from k3ssim import resources
from k3ssim.auth import Authorizer
from k3ssim.cluster import Cluster
from k3ssim.control import ControlServer, Faults, Stats
from k3ssim.http_api import ApiServer, log, tls_context
from k3ssim.node import NodeModel, NodeOptions
from k3ssim.registry import Registry
from k3ssim.store import Store

RESTART_RV_JUMP = 1000000


class ApiListener:
    """The HTTPS listener, which the refuse_ms fault closes and reopens on
    the same port."""

    def __init__(self, sim, context):
        self.sim = sim
        self.context = context
        self.lock = threading.Lock()
        self.server = ApiServer(("127.0.0.1", 0), sim, context)
        self.port = self.server.server_address[1]
        self._serve(self.server)

    @staticmethod
    def _serve(server):
        threading.Thread(target=server.serve_forever, args=(0.05,),
                         daemon=True).start()

    def refuse(self, ms):
        with self.lock:
            server, self.server = self.server, None
        if server is not None:
            server.shutdown()
            server.server_close()
            server.close_connections()
        threading.Timer(ms / 1000.0, self._reopen).start()

    def _reopen(self):
        for _ in range(100):
            try:
                server = ApiServer(("127.0.0.1", self.port), self.sim,
                                   self.context)
                break
            except OSError:
                time.sleep(0.05)
        else:
            log(f"cannot listen on port {self.port} again")
            return
        with self.lock:
            self.server = server
        self._serve(server)
        log(f"listening again on port {self.port}")


class Simulator:
    def __init__(self, args, ca_pem):
        self.stopping = False
        self.store = Store()
        self.registry = Registry(self.store)
        self.stats = Stats()
        self.faults = Faults(self.stats)
        self.pods = resources.BY_KIND["Pod"]
        self.authorizer = Authorizer(self.store, resources.BY_KIND)
        self.cluster = Cluster(self.registry, ca_pem,
                               args.k3s_runtime_classes)
        for index, options in enumerate(node_options(args)):
            options.index = index
            self.cluster.kubelets.append(NodeModel(self.cluster, options))
        self.api = None

    @staticmethod
    def log(message):
        log(message)

    def apply_faults(self, knobs):
        self.faults.set(knobs)
        if knobs.get("drop_watches"):
            self.store.end_watches()
        if knobs.get("restart"):
            self.store.restart(RESTART_RV_JUMP)
        if knobs.get("refuse_ms"):
            self.api.refuse(int(knobs["refuse_ms"]))


def node_options(args):
    if not args.nodes_json:
        return [NodeOptions(name=args.node, root=args.root,
                            containerd_socket=args.containerd_socket,
                            gpus=args.gpus,
                            plugin_start_ms=args.plugin_start_ms)]
    with open(args.nodes_json) as f:
        nodes = json.load(f)
    return [NodeOptions(name=n["name"], root=n["root"],
                        containerd_socket=n.get("containerd_socket", ""),
                        gpus=int(n.get("gpus", 0)),
                        plugin_start_ms=int(n.get("plugin_start_ms",
                                                  args.plugin_start_ms)),
                        server=bool(n.get("server", False)),
                        embedded_registry_mirror=bool(
                            n.get("embedded_registry_mirror", False)))
            for n in nodes]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--root", default="")
    parser.add_argument("--nodes-json", default="")
    parser.add_argument("--containerd-socket", default="")
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--node", default="gpu-node-1")
    parser.add_argument("--plugin-start-ms", type=int, default=100)
    parser.add_argument("--parent-pid", type=int, default=0)
    parser.add_argument("--k3s-runtime-classes", action="store_true",
                        help="pre-create k3s's manifests/runtimes.yaml "
                        "RuntimeClasses, as k3s >= v1.29 does by default")
    args = parser.parse_args()
    if not args.root and not args.nodes_json:
        parser.error("--root or --nodes-json is required")
    return args


def write_ready(directory, port, control_port):
    path = os.path.join(directory, "ready.json")
    partial = path + ".partial"
    with open(partial, "w") as f:
        json.dump({"port": port, "control_port": control_port,
                   "pid": os.getpid()}, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(partial, path)


def main():
    args = parse_args()
    with open(os.path.join(args.dir, "ca.pem")) as f:
        ca_pem = f.read()
    sim = Simulator(args, ca_pem)
    sim.cluster.bootstrap()
    context = tls_context(os.path.join(args.dir, "server.pem"),
                          os.path.join(args.dir, "server-key.pem"),
                          os.path.join(args.dir, "client-ca.pem"))
    sim.api = ApiListener(sim, context)
    control = ControlServer(("127.0.0.1", 0), sim)
    threading.Thread(target=control.serve_forever, daemon=True).start()
    stop = threading.Event()
    threading.Thread(target=sim.cluster.run_forever, args=(stop,),
                     daemon=True).start()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    write_ready(args.dir, sim.api.port, control.server_address[1])
    log(f"k3s_sim: API on 127.0.0.1:{sim.api.port}, control on "
        f"127.0.0.1:{control.server_address[1]}, nodes "
        f"{', '.join(k.node_name for k in sim.cluster.kubelets)}")
    while not stop.wait(0.2):
        if args.parent_pid and os.getppid() != args.parent_pid:
            log("k3s_sim: parent is gone, exiting")
            break
    sim.stopping = True
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # daemon threads may be blocked in sockets


if __name__ == "__main__":
    main()
