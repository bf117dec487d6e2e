"""The Ansible test bed over a sim_cluster run (Python standard library only).

sim_cluster (test/tools/sim_cluster.cpp) writes DIR/NODE.env per simulated
node; this module turns those into an inventory, starts a real key-only sshd
for the node reached over SSH, makes a signed bundle and runs Debian's
ansible-playbook with a json stdout callback, returning its parsed output.
"""

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("GPUNODE_BUILD_DIR", REPO / "build"))
COLLECTIONS = REPO / "packaging" / "ansible"
PLAYBOOK = "gpunode.gpunode.rollout"
SKIP = 77  # ctest's SKIP_RETURN_CODE for these tests


def skip(reason):
    print(f"SKIPPED: {reason}", flush=True)
    sys.exit(SKIP)


def require_tools():
    """Skips (77) when the bed cannot be built here, naming what is missing."""
    for tool in ("ansible-playbook", "ansible", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            skip(f"{tool} not installed (scripts/setup.sh installs it)")
    if not os.access("/usr/sbin/sshd", os.X_OK):
        skip("/usr/sbin/sshd not installed (openssh-server)")


def read_env(path):
    """NODE.env: ROOT=<host tree> first, then the VAR=value lines gpunode
    needs on that node. Returns (root, environment dict)."""
    root, env = None, {}
    for line in pathlib.Path(path).read_text().splitlines():
        if not line:
            continue
        key, _, value = line.partition("=")
        if key == "ROOT":
            root = value
        else:
            env[key] = value
    if root is None:
        raise ValueError(f"{path}: no ROOT= line")
    return root, env


def free_port():
    # The kernel picks a free loopback port; sshd binds it right after.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sshd:
    """A real Debian sshd on 127.0.0.1 and its own port, key-only, with its
    own host key, authorized keys and pid file in a temp dir. Use as a
    context manager: it is stopped and waited for on the way out."""

    def __init__(self, workdir):
        self.dir = pathlib.Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.client_key = self.dir / "client_ed25519"
        self.stranger_key = self.dir / "stranger_ed25519"
        self.known_hosts = self.dir / "known_hosts"
        self.proc = None

    def _keygen(self, path):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                        "gpunode-test", "-f", str(path)], check=True)

    def __enter__(self):
        host_key = self.dir / "ssh_host_ed25519_key"
        self._keygen(host_key)
        self._keygen(self.client_key)
        self._keygen(self.stranger_key)
        authorized = self.dir / "authorized_keys"
        authorized.write_text(
            pathlib.Path(f"{self.client_key}.pub").read_text())
        host_pub = pathlib.Path(f"{host_key}.pub").read_text().split()
        self.known_hosts.write_text(
            f"[127.0.0.1]:{self.port} {host_pub[0]} {host_pub[1]}\n")
        config = self.dir / "sshd_config"
        # sshd_config(5). StrictModes no: the temp dir's parent is /tmp
        # (world-writable), which StrictModes would refuse for the keys file.
        config.write_text(f"""\
ListenAddress 127.0.0.1
Port {self.port}
HostKey {host_key}
PidFile {self.dir / "sshd.pid"}
AuthorizedKeysFile {authorized}
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
""")
        # The privilege separation dir sshd insists on (Debian's unit makes
        # it through RuntimeDirectory=sshd; here nothing has).
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        self.log = open(self.dir / "sshd.log", "w")
        self.proc = subprocess.Popen(
            ["/usr/sbin/sshd", "-D", "-e", "-f", str(config)],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"sshd exited {self.proc.returncode}: see {self.log.name}")
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("sshd did not listen within 10s")
                time.sleep(0.05)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log_text(self):
        self.log.flush()
        return pathlib.Path(self.log.name).read_text(errors="replace")

    def __exit__(self, *exc):
        self.stop()
        self.log.close()

    def common_args(self):
        return (f"-F /dev/null -o UserKnownHostsFile={self.known_hosts} "
                "-o StrictHostKeyChecking=yes")

    def try_login(self, *options):
        """ssh root@127.0.0.1 true with OPTIONS; returns (rc, stderr)."""
        cmd = ["ssh", "-F", "/dev/null", "-p", str(self.port), "-o",
               "BatchMode=yes", "-o", f"UserKnownHostsFile={self.known_hosts}",
               "-o", "StrictHostKeyChecking=yes", "-o", "IdentitiesOnly=yes",
               *options, "root@127.0.0.1", "true"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
        return done.returncode, done.stderr

    def vars(self):
        return {
            "ansible_connection": "ssh",
            "ansible_host": "127.0.0.1",
            "ansible_port": self.port,
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(self.client_key),
            "ansible_ssh_common_args": self.common_args(),
        }


class Bed:
    """One case's view of a sim_cluster run: DIR (sim_cluster's --dir), a
    work dir, the nodes' roots and environments, the inventory."""

    def __init__(self, sim_dir, work):
        self.sim_dir = pathlib.Path(sim_dir)
        self.work = pathlib.Path(work)
        self.nodes = {}
        for env_file in sorted(self.sim_dir.glob("*.env")):
            self.nodes[env_file.stem] = read_env(env_file)
        self.archive = self.sim_dir / "k8s-device-plugin.tar"

    def root(self, node):
        return self.nodes[node][0]

    def make_bundle(self, out):
        """A bundle signed with a fresh key; returns (bundle dir, pub key)."""
        # The bundle carries the binary that made it. The build's has debug
        # info (RelWithDebInfo, ~95 MB; a release's is ~3 MB): copying that
        # to every node would time the copy module, not the rollout.
        gpunode = str(self.work / "gpunode-stripped")
        subprocess.run(["objcopy", "--strip-debug", str(BUILD / "gpunode"),
                        gpunode], check=True)
        key = self.work / "publisher"
        subprocess.run([gpunode, "bundle", "keygen", "--out", str(key)],
                       check=True, capture_output=True)
        subprocess.run([gpunode, "bundle", "create", "--out", str(out),
                        "--image-archive", str(self.archive), "--sign-key",
                        f"{key}.key"], check=True, capture_output=True)
        return pathlib.Path(out), pathlib.Path(f"{key}.pub")

    def host_vars(self, node, binary="gpunode", **extra):
        root, env = self.nodes[node]
        values = {
            "ansible_connection": "local",
            # Debian's ansible runs on /usr/bin/python3; PATH may name
            # another python3 first (pyenv).
            "ansible_python_interpreter": "/usr/bin/python3",
            "gpunode_root": root,
            "gpunode_environment": env,
            "gpunode_binary": str(BUILD / binary),
            "gpunode_timeout": "60s",
        }
        values.update(extra)
        return values

    def write_inventory(self, servers, gpu_nodes, other=(), all_vars=None,
                        name="inventory.json"):
        """An inventory (the yaml plugin reads JSON): SERVERS and GPU_NODES
        map a host to its vars, OTHER lists hosts in group cpu_nodes that
        the playbook must leave alone."""
        inventory = {
            "all": {
                "vars": all_vars or {},
                "children": {
                    "gpunode_servers": {"hosts": servers},
                    "gpunode_gpu_nodes": {"hosts": gpu_nodes},
                    "cpu_nodes": {"hosts": {h: self.host_vars(h)
                                            for h in other}},
                },
            }
        }
        path = self.work / name
        path.write_text(json.dumps(inventory, indent=1))
        return path


def ansible_env(work):
    env = dict(os.environ)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
        # The whole run as one JSON document on stdout (callback_plugins/
        # fleet_json.py). Ad-hoc `ansible` uses the stdout callback only with
        # ANSIBLE_LOAD_CALLBACK_PLUGINS set (config: bin_ansible_callbacks).
        "ANSIBLE_CALLBACK_PLUGINS": str(pathlib.Path(__file__).parent
                                        / "callback_plugins"),
        "ANSIBLE_STDOUT_CALLBACK": "fleet_json",
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_LOCAL_TEMP": str(pathlib.Path(work) / "ansible-tmp"),
        # No ControlPersist master: it would outlive the run (60s by
        # default) and ctest's run_reaped fails on leftover processes.
        "ANSIBLE_SSH_ARGS": "-o ControlMaster=no",
    })
    return env


def run_ansible(argv, work, timeout=240, env=None):
    """Runs ansible or ansible-playbook ARGV (ENV: more environment);
    returns (rc, parsed json callback output or None, stderr text)."""
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True,
                          env={**ansible_env(work), **(env or {})},
                          timeout=timeout,
                          stdin=subprocess.DEVNULL)
    print(f"  ({' '.join(argv[:2])} {' '.join(argv[6:])}: exit "
          f"{done.returncode}, {time.monotonic() - start:.1f} s)", flush=True)
    # Each run's output stays in the work dir, numbered, for a post-mortem.
    runs = sorted(pathlib.Path(work).glob("run-*.json"))
    (pathlib.Path(work) / f"run-{len(runs) + 1:02}.json").write_text(done.stdout)
    try:
        parsed = json.loads(done.stdout)
    except ValueError:
        parsed = None
    return done.returncode, parsed, done.stderr, done.stdout


def playbook(inventory, work, *extra, forks=10, timeout=240):
    return run_ansible(["ansible-playbook", PLAYBOOK, "-i", str(inventory),
                        "-f", str(forks), *extra], work, timeout)
