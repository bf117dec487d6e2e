#!/usr/bin/python3
"""Part four of the demo, run by scripts/demo.sh inside build/test/sim_cluster:
the rollout playbook (gpunode.gpunode.rollout, Debian's ansible-playbook)
over the simulated fleet, as an operator sees it: a check run that changes
nothing, the rollout (one GPU node's handler is broken: it fails with
gpunode's diagnosis while the others converge), then a rerun in which
nothing changes. The inventory is written by the test bed
(test/ansible/fleet_bed.py) from sim_cluster's DIR/NODE.env files.
usage: demo-fleet.py DIR"""

import os
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "test" / "ansible"))
import fleet_bed  # noqa: E402


def say(text):
    print(f"\n\033[1m== {text}\033[0m", flush=True)


def playbook(inventory, work, *extra):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(fleet_bed.COLLECTIONS),
               ANSIBLE_LOCAL_TEMP=str(work / "ansible-tmp"),
               ANSIBLE_RETRY_FILES_ENABLED="0",
               # Results as YAML, readable (ansible-core's default callback).
               ANSIBLE_CALLBACK_RESULT_FORMAT="yaml",
               ANSIBLE_CALLBACKS_ENABLED="gpunode.gpunode.rollout_summary")
    argv = ["ansible-playbook", fleet_bed.PLAYBOOK, "-i", str(inventory),
            "-f", "8", *extra]
    print("$ " + " ".join(argv), flush=True)
    rc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL).returncode
    print(f"(exit {rc})", flush=True)


def main():
    sim_dir = pathlib.Path(sys.argv[1]).resolve()
    work = sim_dir / "ansible"
    work.mkdir(exist_ok=True)
    bed = fleet_bed.Bed(sim_dir, work)
    gpu_nodes = sorted(n for n in bed.nodes if n.startswith("gpu-"))
    archive = {"gpunode_image_archive": str(bed.archive)}
    inventory = bed.write_inventory(
        servers={"server": bed.host_vars("server")},
        gpu_nodes={n: bed.host_vars(n, **archive) for n in gpu_nodes},
        other=[n for n in bed.nodes if n.startswith("cpu-")])
    say("12. A fleet with Ansible: server, GPU agents " + ", ".join(gpu_nodes) +
        " (gpu-d's k3s started before its toolkit), CPU-only cpu-1")
    say("    Check mode first: what would change, changing nothing")
    playbook(inventory, work, "--check", "--diff")
    say("    The rollout: the cluster part once, the node parts two at a time")
    playbook(inventory, work, "-e", "gpunode_serial=2")
    say("    A rerun: every converged node reports ok, changed=0")
    playbook(inventory, work, "-e", "gpunode_serial=2")


if __name__ == "__main__":
    main()
