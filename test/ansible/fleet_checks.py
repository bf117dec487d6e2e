"""Named assertions and readers of the json callback output and the cluster.

Every assertion prints PASS/FAIL with its name, so a case that checks many
things shows which one broke; the case exits 1 if any failed.
"""

import json
import subprocess


class Checks:
    def __init__(self, case):
        self.case = case
        self.failed = []

    def check(self, name, ok, detail=""):
        # DETAIL holds what ansible and gpunode wrote: control characters
        # are shown escaped, never sent to the terminal.
        detail = "".join(c if c.isprintable() or c == "\n" else
                         c.encode("unicode_escape").decode() for c in detail)
        print(f"{'PASS' if ok else 'FAIL'} {self.case}: {name}"
              + (f" ({detail})" if detail and not ok else ""), flush=True)
        if not ok:
            self.failed.append(name)
        return ok

    def exit_code(self):
        if self.failed:
            print(f"{self.case}: {len(self.failed)} failed: "
                  + ", ".join(self.failed), flush=True)
            return 1
        print(f"{self.case}: all passed", flush=True)
        return 0


def stats(output):
    """Per host {ok, changed, failures, unreachable, rescued, skipped}."""
    return (output or {}).get("stats", {})


def task_results(output, play_prefix=None):
    """(play name, task name, host, result) for every task result, in run
    order; PLAY_PREFIX keeps only plays whose name starts with it."""
    for play in (output or {}).get("plays", []):
        name = play.get("play", {}).get("name", "")
        if play_prefix and not name.startswith(play_prefix):
            continue
        for task in play.get("tasks", []):
            for host, result in task.get("hosts", {}).items():
                yield name, task.get("task", {}).get("name", ""), host, result


def node_part_plays(output):
    """Per node-part play (one per serial batch): the hosts that ran in it."""
    batches = []
    for play in (output or {}).get("plays", []):
        if not play.get("play", {}).get("name", "").startswith("Node part"):
            continue
        hosts = set()
        for task in play.get("tasks", []):
            hosts.update(task.get("hosts", {}).keys())
        batches.append(hosts)
    return batches


def gpunode_results(output, scope=None):
    """host -> the last module result carrying a `gpunode` dict (of SCOPE
    when given: node or cluster)."""
    found = {}
    for _, _, host, result in task_results(output):
        g = result.get("gpunode")
        if isinstance(g, dict) and (scope is None or g.get("scope") == scope):
            found[host] = result
    return found


def find_key(value, key):
    """The first value of KEY anywhere inside VALUE (dicts and lists)."""
    if isinstance(value, dict):
        if key in value:
            return value[key]
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            hit = find_key(item, key)
            if hit is not None:
                return hit
    return None


def summary(output):
    """node -> its entry of gpunode_summary (the summary play's result)."""
    entries = None
    for _, _, _, result in task_results(output, "Summary"):
        hit = find_key(result, "gpunode_summary")
        if hit is not None:
            entries = hit
    return {e.get("node"): e for e in entries or [] if isinstance(e, dict)}


def kubectl_json(*args):
    done = subprocess.run(["kubectl", *args, "-o", "json"], check=True,
                          capture_output=True, text=True, timeout=60)
    return json.loads(done.stdout)


def cluster_nodes():
    """node -> (labels, {nvidia.com/ resource: allocatable}), read with real
    kubectl under sim_cluster's admin KUBECONFIG."""
    nodes = {}
    for item in kubectl_json("get", "nodes")["items"]:
        alloc = item.get("status", {}).get("allocatable", {})
        nodes[item["metadata"]["name"]] = (
            item["metadata"].get("labels", {}),
            {k: v for k, v in alloc.items() if k.startswith("nvidia.com/")})
    return nodes


def kubectl_apply(text):
    """kubectl apply -f - of TEXT (a manifest), as an operator would."""
    subprocess.run(["kubectl", "apply", "-f", "-"], input=text, check=True,
                   capture_output=True, text=True, timeout=60)


def cluster_objects():
    """What the cluster part and the labels write, comparable before and
    after a run: Node labels, RuntimeClasses, DaemonSets, ConfigMaps."""
    def names(*args):
        return sorted(i["metadata"].get("namespace", "") + "/"
                      + i["metadata"]["name"]
                      for i in kubectl_json("get", *args)["items"])
    return {
        "labels": {n: sorted(k for k in labels if k.startswith("nvidia.com/"))
                   for n, (labels, _) in cluster_nodes().items()},
        "runtimeclasses": names("runtimeclasses"),
        "daemonsets": names("daemonsets", "-A"),
        "configmaps": names("configmaps", "-A"),
    }
