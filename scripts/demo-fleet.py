#!/usr/bin/python3
"""Part four of the demo, run by scripts/demo.sh inside build/test/sim_cluster:
the rollout playbook (gpunode.gpunode.rollout, Debian's ansible-playbook)
over the simulated fleet, as an operator reads it: the fleet summary first
(each node's outcome, and why), Ansible's own output kept in a log file.
A check run that changes nothing and shows each node's plan; the rollout,
where gpu-d fails (its k3s rendered containerd's config before the toolkit
came) with a fix line that names the role variable; a rerun with that
variable set for gpu-d, which converges; a last rerun that changes
nothing. The inventory is written by the test bed
(test/ansible/fleet_bed.py) from sim_cluster's DIR/NODE.env files.
usage: demo-fleet.py DIR"""

import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "test" / "ansible"))
import fleet_bed  # noqa: E402
import fleet_checks  # noqa: E402


def say(text):
    print(f"\n\033[1m== {text}\033[0m", flush=True)


def playbook(inventory, work, *extra):
    """Runs the playbook; prints its command, the fleet summary and where
    Ansible's full output went. Returns the exit code."""
    print("$ ansible-playbook gpunode.gpunode.rollout -i "
          f"{inventory.name} -f 8 {' '.join(extra)}".rstrip(), flush=True)
    rc, out, _, _ = fleet_bed.run_ansible(
        ["ansible-playbook", fleet_bed.PLAYBOOK, "-i", str(inventory), "-f",
         "8", *extra], work, timeout=600)
    rows = fleet_checks.summary(out)
    for row in rows.values():
        print("  " + row.get("line", ""), flush=True)
    if "--check" in extra:
        for host, r in sorted(fleet_checks.gpunode_results(out).items()):
            plan = [d.get("before_header", "").split(" (")[0]
                    for d in r.get("diff") or []]
            if plan:
                print(f"  {host} would change: {', '.join(plan)}", flush=True)
    runs = sorted(work.glob("run-*.json"))
    print(f"  (exit {rc}; Ansible's whole output: {runs[-1] if runs else '-'})",
          flush=True)
    return rc


def main():
    sim_dir = pathlib.Path(sys.argv[1]).resolve()
    work = sim_dir / "ansible"
    work.mkdir(exist_ok=True)
    bed = fleet_bed.Bed(sim_dir, work)
    gpu_nodes = sorted(n for n in bed.nodes if n.startswith("gpu-"))
    archive = {"gpunode_image_archive": str(bed.archive)}

    def inventory(**gpu_d):
        nodes = {n: bed.host_vars(n, **archive) for n in gpu_nodes}
        nodes["gpu-d"].update(gpu_d)
        return bed.write_inventory(
            servers={"server": bed.host_vars("server")}, gpu_nodes=nodes,
            other=[n for n in bed.nodes if n.startswith("cpu-")],
            all_vars={"gpunode_serial": 2})
    say("12. A fleet with Ansible: server, GPU agents " + ", ".join(gpu_nodes) +
        " (gpu-d's k3s started before its toolkit), CPU-only cpu-1")
    say("    Check mode first: each node's plan, nothing changed")
    playbook(inventory(), work, "--check", "--diff")
    say("    The rollout: the cluster part once, the node parts two at a time")
    playbook(inventory(), work)
    say("    gpu-d's fix names the role variable: set gpunode_restart_k3s for "
        "gpu-d (host_vars/gpu-d.yml) and rerun")
    fixed = inventory(gpunode_restart_k3s=True)
    print(f"  gpu-d: gpunode_restart_k3s: true   (in {fixed.name})", flush=True)
    rc = playbook(fixed, work)
    say("    A rerun: every node ok, nothing changed")
    rc = playbook(fixed, work) or rc
    return rc


if __name__ == "__main__":
    sys.exit(main())
