"""Times the rollout playbook against its peers, each measured in this run.

1. The bundle copy. Peer: a plain `tar -c | ssh node 'mkdir -p D && tar
   -x -C D'` stream of the same signed bundle to the same node (gpu-1, over
   the bench's own sshd, one session), right after the playbook's first
   run, the best of three. Goal: the role's copy (its one
   task, gpunode_bundle_copy's stream) <= 1.2x the stream.
2. The rollout by hand. Peer: the same signed bundle moved by hand and
   installed by hand, one node after the other, as an operator without
   Ansible would: tar | ssh to each node, then `gpunode install --bundle`
   there (it verifies the signature and every hash), the cluster part on the
   server first. Same fresh cluster shape, same bundle.
3. 8 nodes against 1 (forks and serial >= 8). Goal: <= 2x.
For each size, a fresh sim_cluster (one server, N one-GPU agents, gpu-1
reached over SSH, the others over the local connection). The bundle carries
the build's gpunode unstripped (about 120 MB), so the copy is a stream,
not a handshake.
Run by scripts/bench.sh as build/test/ansible_fleet_bench (needs root);
GPUNODE_BENCH_SIZES="1" measures N = 1 alone (the 8-node line then shows
nothing).
"""

import json
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "ansible"))
import fleet_bed as bed  # noqa: E402

SIZES = tuple(int(n) for n in os.environ.get("GPUNODE_BENCH_SIZES", "1 8").split())
BY_HAND = 0  # measure()'s N for the by-hand peer (one agent)


def make_bundle(b, out):
    """The bench's bundle: signed, carrying the unstripped build gpunode."""
    gpunode = str(bed.BUILD / "gpunode")
    key = b.work / "publisher"
    subprocess.run([gpunode, "bundle", "keygen", "--out", str(key)],
                   check=True, capture_output=True)
    subprocess.run([gpunode, "bundle", "create", "--out", str(out),
                    "--image-archive", str(b.archive), "--sign-key",
                    f"{key}.key"], check=True, capture_output=True)
    return pathlib.Path(out), pathlib.Path(f"{key}.pub")


def ssh_argv(sshd, *remote):
    """ssh to the bench's sshd as root, running REMOTE (argv, quoted)."""
    return ["ssh", "-F", "/dev/null", "-p", str(sshd.port), "-o",
            "BatchMode=yes", "-o", f"UserKnownHostsFile={sshd.known_hosts}",
            "-o", "StrictHostKeyChecking=yes", "-i", str(sshd.client_key),
            "-o", "ControlMaster=no", "root@127.0.0.1",
            " ".join(shlex.quote(a) for a in remote)]


def stream(bundle, dest, sshd=None):
    """tar -c BUNDLE | (ssh node) 'mkdir -p DEST && tar -x -C DEST', one
    session; returns seconds."""
    start = time.monotonic()
    unpack = (f"mkdir -p {shlex.quote(str(dest))} && tar -x --no-same-owner "
              f"-f - -C {shlex.quote(str(dest))}")
    tar = subprocess.Popen(["tar", "-c", "-f", "-", "-C", str(bundle), "."],
                           stdout=subprocess.PIPE)
    node = ssh_argv(sshd, "sh", "-c", unpack) if sshd else ["sh", "-c", unpack]
    subprocess.run(node, stdin=tar.stdout, check=True)
    tar.stdout.close()
    if tar.wait() != 0:
        raise RuntimeError("tar -c failed")
    return time.monotonic() - start


def install_by_hand(b, node, scope, dest, pub, sshd=None):
    """gpunode install --bundle DEST on NODE, as an operator runs it."""
    root, env = b.nodes[node]
    argv = [str(bed.BUILD / "gpunode"), "install", "--scope", scope,
            "--bundle", str(dest), "--trust-key", str(pub), "--timeout", "60s",
            "--root", root]
    if sshd:
        subprocess.run(ssh_argv(sshd, "env", *[f"{k}={v}" for k, v in
                                                env.items()], *argv),
                       check=True, capture_output=True,
                       stdin=subprocess.DEVNULL)
    else:
        subprocess.run(argv, env={**os.environ, **env}, check=True,
                       capture_output=True)


def by_hand(b, agents, sshd):
    """The peer: the bundle moved and installed by hand, node by node."""
    bundle, pub = make_bundle(b, b.work / "bundle")
    start = time.monotonic()
    for node in ["server", *agents]:
        dest = b.work / f"on-{node}" / "bundle"
        over = sshd if node == agents[0] else None
        stream(bundle, dest, over)
        install_by_hand(b, node, "cluster" if node == "server" else "node",
                        dest, pub, over)
    return {"by_hand": time.monotonic() - start}


def copy_seconds(output):
    """The role's bundle copy: the slowest host's tar stream task
    (fleet_json's per-result _fleet_seconds), start to end."""
    return max([r.get("_fleet_seconds", 0)
                for play in (output or {}).get("plays", [])
                for task in play.get("tasks", [])
                if "Copy the bundle from the controller" in
                task.get("task", {}).get("name", "")
                for r in task.get("hosts", {}).values()], default=0.0)


def inner(n, sim_dir):
    """Inside sim_cluster: the playbook's first run and rerun (and the
    stream peer on N=1), or the by-hand peer (N=0)."""
    work = pathlib.Path(sim_dir) / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    b = bed.Bed(sim_dir, work)
    agents = sorted(name for name in b.nodes if name != "server")
    result = {}
    # As an operator's ansible.cfg would have it (`pipelining = True`): one
    # SSH session a task instead of three. GPUNODE_BENCH_PIPELINING=0 times
    # Ansible's default.
    os.environ["ANSIBLE_PIPELINING"] = os.environ.get(
        "GPUNODE_BENCH_PIPELINING", "1")
    with bed.Sshd(work / "sshd") as sshd:
        if n == BY_HAND:
            result = by_hand(b, agents, sshd)
            print("RESULT " + json.dumps(result), flush=True)
            return 0
        bundle, pub = make_bundle(b, work / "bundle")

        def node(name, **extra):
            return b.host_vars(name, gpunode_bundle_src=str(bundle),
                               gpunode_bundle_dir=f"{work}/on-{name}/bundle",
                               gpunode_trust_keys=[str(pub)], **extra)
        inventory = b.write_inventory(
            {"server": node("server")},
            {a: node(a, **(sshd.vars() if a == agents[0] else {}))
             for a in agents},
            all_vars={"gpunode_serial": n,
                      "gpunode_controller_binary": str(bed.BUILD / "gpunode"),
                      "gpunode_controller_cache": str(work / "cache")})
        for label in ("first", "rerun"):
            start = time.monotonic()
            rc, out, err, raw = bed.playbook(inventory, work, forks=n + 1,
                                             timeout=600)
            result[label] = time.monotonic() - start
            result[label + "_copy"] = copy_seconds(out)
            changed = sum(s.get("changed", 0) for s in (out or {})
                          .get("stats", {}).values())
            if rc != 0 or (label == "rerun" and changed != 0):
                print(f"N={n} {label}: rc {rc}, changed {changed}\n"
                      f"{err[-3000:]}{raw[-3000:]}", file=sys.stderr)
                return 1
        if n == 1:
            # The peer at its best of three (each to a fresh directory).
            result["stream"] = min(
                stream(bundle, work / f"streamed-{i}" / "bundle", sshd)
                for i in range(3))
    result["bundle_bytes"] = sum(f.stat().st_size for f in bundle.rglob("*")
                                 if f.is_file())
    print("RESULT " + json.dumps(result), flush=True)
    return 0


def measure(n, base):
    """One fresh sim_cluster of N agents (BY_HAND: one, for the peer)."""
    sim_dir = base / f"n{n}"
    shutil.rmtree(sim_dir, ignore_errors=True)
    nodes = ["--node", "server:server:0"]
    for i in range(1, max(n, 1) + 1):
        nodes += ["--node", f"gpu-{i}:agent:1"]
    done = subprocess.run(
        [str(bed.BUILD / "test" / "sim_cluster"), "--dir", str(sim_dir), *nodes,
         "--", sys.executable, __file__, "--inner", str(n), str(sim_dir)],
        capture_output=True, text=True, timeout=1200)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    sys.exit(f"N={n} failed (exit {done.returncode}):\n"
             f"{done.stdout[-3000:]}{done.stderr[-3000:]}")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--inner":
        return inner(int(sys.argv[2]), sys.argv[3])
    for tool in ("ansible-playbook", "ssh"):
        if shutil.which(tool) is None:
            print(f"skipped: {tool} not installed (scripts/setup.sh)")
            return 0
    if not os.access("/usr/sbin/sshd", os.X_OK):
        print("skipped: /usr/sbin/sshd not installed (openssh-server)")
        return 0
    base = bed.BUILD / "test" / "ansible-fleet-bench"
    rows = {n: measure(n, base) for n in SIZES}
    hand = measure(BY_HAND, base)["by_hand"]
    one = rows[1]
    mb = one["bundle_bytes"] / 1e6
    print(f"rollout playbook, bundle of {mb:.0f} MB, one run each "
          "(forks and serial >= N, ANSIBLE_PIPELINING="
          f"{os.environ.get('GPUNODE_BENCH_PIPELINING', '1')}):")
    print(f"  {'N':>3}  {'first s':>8}  {'copy s':>7}  {'rerun s':>8}  "
          f"{'copy s':>7}")
    for n, r in rows.items():
        print(f"  {n:>3}  {r['first']:8.2f}  {r['first_copy']:7.2f}  "
              f"{r['rerun']:8.2f}  {r['rerun_copy']:7.2f}")
    print(f"  copy: the role's {one['first_copy']:.2f} s against tar | ssh of "
          f"the same bundle to the same node {one['stream']:.2f} s: "
          f"{one['first_copy'] / one['stream']:.2f}x (goal <= 1.2x)")
    if 8 in rows:
        print(f"  8 nodes against 1: {rows[8]['first'] / one['first']:.2f}x "
              "(goal <= 2x)")
    print(f"  1 node against the same bundle moved and installed by hand "
          f"(tar | ssh, gpunode install --bundle, server then node): "
          f"{one['first']:.2f} s vs {hand:.2f} s: {one['first'] / hand:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
