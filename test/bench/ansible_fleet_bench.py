"""Times the rollout playbook over N simulated GPU nodes (N = 1, 4, 8).

For each N, a fresh sim_cluster (one server, N one-GPU agents) and, inside
it, ansible-playbook gpunode.gpunode.rollout with forks and serial >= N:
the first run (every node converges) and a rerun (changed=0). Each time is
printed with its ratio to N=1 measured in this same run, and per node. The
peer "gpunode alone" is the same work without Ansible on N=1: the cluster
part, then the node part, run directly.
Run by scripts/bench.sh as build/test/ansible_fleet_bench (needs root).
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "ansible"))
import fleet_bed as bed  # noqa: E402

SIZES = (1, 4, 8)


def inner(n, sim_dir):
    """Inside sim_cluster: times the playbook twice, and gpunode alone."""
    work = pathlib.Path(sim_dir) / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    b = bed.Bed(sim_dir, work)
    agents = sorted(name for name in b.nodes if name != "server")
    result = {}
    if n == 0:  # the peer: gpunode alone, one node, no Ansible
        start = time.monotonic()
        for node, scope in (("server", "cluster"), (agents[0], "node")):
            root, env = b.nodes[node]
            subprocess.run([str(bed.BUILD / "gpunode"), "install", "--scope",
                            scope, "--image-archive", str(b.archive),
                            "--timeout", "60s", "--root", root],
                           env={**os.environ, **env}, check=True,
                           capture_output=True)
        result["alone"] = time.monotonic() - start
        print("RESULT " + json.dumps(result), flush=True)
        return 0
    bundle, pub = b.make_bundle(work / "bundle")

    def node(name):
        return b.host_vars(name, gpunode_bundle_src=str(bundle),
                           gpunode_bundle_dir=f"{work}/on-{name}/bundle",
                           gpunode_trust_keys=[str(pub)])
    inventory = b.write_inventory(
        {"server": node("server")}, {a: node(a) for a in agents},
        all_vars={"gpunode_serial": n})
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
    print("RESULT " + json.dumps(result), flush=True)
    return 0


def copy_seconds(output):
    """The bundle copy's share: the slowest host's seconds in the role's
    copy task (fleet_json's per-result _fleet_seconds)."""
    seconds = [r.get("_fleet_seconds", 0)
               for play in (output or {}).get("plays", [])
               for task in play.get("tasks", [])
               if "Copy the bundle" in task.get("task", {}).get("name", "")
               for r in task.get("hosts", {}).values()]
    return max(seconds, default=0.0)


def measure(n, base):
    """One fresh sim_cluster of N agents (0: the gpunode-alone peer)."""
    sim_dir = base / f"n{n}"
    shutil.rmtree(sim_dir, ignore_errors=True)
    nodes = ["--node", "server:server:0"]
    for i in range(1, max(n, 1) + 1):
        nodes += ["--node", f"gpu-{i}:agent:1"]
    done = subprocess.run(
        [str(bed.BUILD / "test" / "sim_cluster"), "--dir", str(sim_dir), *nodes,
         "--", sys.executable, __file__, "--inner", str(n), str(sim_dir)],
        capture_output=True, text=True, timeout=900)
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
    base = bed.BUILD / "test" / "ansible-fleet-bench"
    alone = measure(0, base)["alone"]
    rows = {n: measure(n, base) for n in SIZES}
    print("rollout playbook over N simulated GPU nodes (one server, forks and "
          "serial >= N), one run each:")
    print(f"  gpunode alone on 1 node (cluster + node part, no Ansible): "
          f"{alone:.2f} s")
    print(f"  {'N':>3}  {'first s':>8}  {'x N=1':>6}  {'s/node':>7}  "
          f"{'copy s':>7}  {'rerun s':>8}  {'x N=1':>6}  {'s/node':>7}  "
          f"{'copy s':>7}")
    for n, r in rows.items():
        print(f"  {n:>3}  {r['first']:8.2f}  {r['first'] / rows[1]['first']:6.2f}"
              f"  {r['first'] / n:7.2f}  {r['first_copy']:7.2f}  "
              f"{r['rerun']:8.2f}  {r['rerun'] / rows[1]['rerun']:6.2f}  "
              f"{r['rerun'] / n:7.2f}  {r['rerun_copy']:7.2f}")
    print("  (copy s: the role's bundle copy task, slowest host)")
    print(f"  Ansible's cost over gpunode alone at N=1: "
          f"{rows[1]['first'] / alone:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
