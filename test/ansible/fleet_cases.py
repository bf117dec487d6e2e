"""The collection's playbook against simulated nodes, with Debian's Ansible.

Run inside sim_cluster (test/CMakeLists.txt registers each case):
    sim_cluster --dir DIR --node ... -- python3 fleet_cases.py CASE DIR
Each case prints a named PASS/FAIL line per assertion; exit 0 when all
pass, 1 when one fails, 77 when the bed cannot be built here.
"""

import os
import pathlib
import shutil
import subprocess
import sys

import fleet_bed as bed
import fleet_checks as fc


def bed_proof(checks, b, sshd, inventory):
    """The bed itself: both connections answer ping and run a command, and
    the sshd takes the client key only."""
    rc, out, err, _ = bed.run_ansible(
        ["ansible", "all", "-i", str(inventory), "-m", "ansible.builtin.ping"],
        b.work)
    checks.check("ping answers over local and ssh", rc == 0, err[-2000:])
    rc, out, err, raw = bed.run_ansible(
        ["ansible", "gpunode_gpu_nodes", "-i", str(inventory), "-m",
         "ansible.builtin.command", "-a", "id -un"], b.work)
    users = {host: r.get("stdout") for _, _, host, r in fc.task_results(out)}
    checks.check("command runs as root on each GPU node", rc == 0 and
                 users == {"gpu-a": "root", "gpu-b": "root"},
                 f"{users} {err[-2000:]}")
    checks.check("gpu-b came in over the sshd, with the client key",
                 "Accepted publickey for root" in sshd.log_text())
    rc, err = sshd.try_login("-o", "PubkeyAuthentication=no")
    checks.check("sshd refuses a login without a key", rc == 255 and
                 "Permission denied (publickey)" in err, err)
    rc, err = sshd.try_login("-i", str(sshd.stranger_key))
    checks.check("sshd refuses a key it was not given", rc == 255 and
                 "Permission denied" in err, err)
    rc, err = sshd.try_login("-i", str(sshd.client_key))
    checks.check("sshd takes the client key", rc == 0, err)


def expect_converged(checks, label, gpu_counts, cpu_only=(), replicas=1,
                     resource="nvidia.com/gpu"):
    """Real kubectl: each GPU node labelled and advertising its GPUs x
    REPLICAS slots as RESOURCE (and no other nvidia.com/ resource), each
    CPU-only node without any nvidia.com/ label."""
    nodes = fc.cluster_nodes()
    for node, gpus in gpu_counts.items():
        labels, alloc = nodes.get(node, ({}, {}))
        checks.check(f"{label}: {node} labelled gpu.present",
                     labels.get("nvidia.com/gpu.present") == "true",
                     str(labels))
        slots = gpus * replicas
        checks.check(f"{label}: {node} advertises {slots} {resource}",
                     alloc.get(resource) == str(slots) and
                     all(v == "0" for k, v in alloc.items() if k != resource),
                     f"allocatable {alloc}")
    for node in cpu_only:
        labels, alloc = nodes.get(node, ({}, {}))
        checks.check(f"{label}: CPU-only {node} left unlabelled",
                     not any(k.startswith("nvidia.com/") for k in labels)
                     and not alloc, str(labels))


# The RuntimeClass k3s ships (manifests/runtimes.yaml, k3s >= v1.29): a
# fresh k3s cluster has it before gpunode runs.
K3S_RUNTIMECLASS = """apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: nvidia
handler: nvidia
"""


def installed_gpunode(b):
    """A directory holding gpunode, as the .deb installs it on a node's
    PATH (/usr/bin/gpunode)."""
    path = b.work / "installed-bin"
    path.mkdir(exist_ok=True)
    if not (path / "gpunode").exists():
        (path / "gpunode").symlink_to(bed.BUILD / "gpunode")
    return path


def gpunode_cmds(output, host):
    """The gpunode binaries the modules ran on HOST (each result's cmd[0])."""
    return sorted(set((r.get("cmd") or [""])[0]
                      for _, _, h, r in fc.task_results(output)
                      if h == host and r.get("cmd") and
                      str((r.get("cmd") or [""])[0]).endswith("gpunode")))


def bed_case(checks, b):
    """The bed: a GPU node over local, one over the test's sshd."""
    with bed.Sshd(b.work / "sshd") as sshd:
        inventory = b.write_inventory(
            {}, {"gpu-a": b.host_vars("gpu-a"),
                 "gpu-b": b.host_vars("gpu-b", **sshd.vars())})
        bed_proof(checks, b, sshd, inventory)
        bundle_copy_ways(checks, b, inventory)


def bundle_copy_ways(checks, b, inventory):
    """gpunode_bundle_copy over both connections, both ways: streamed
    (ssh, local), and sent as a file when a become password must be
    answered (become to the same user counts only with
    ANSIBLE_BECOME_ALLOW_SAME_USER; su as root asks for none). Each copy
    replaces the node's directory whole: a stale file from an older bundle
    is gone, and nothing is left beside it."""
    src = b.work / "copy-src"
    (src / "bin").mkdir(parents=True)
    (src / "bundle.toml").write_text("schema = 1\n")
    (src / "bin" / "gpunode").write_bytes(os.urandom(1 << 20))
    (src / "bin" / "gpunode").chmod(0o755)
    want = {p.relative_to(src): p.read_bytes() for p in src.rglob("*")
            if p.is_file()}
    become = ["-e", "ansible_become=true", "-e", "ansible_become_method=su",
              "-e", "ansible_become_password=unused"]
    for way, extra, env in (
            ("stream", [], None),
            ("transfer", become, {"ANSIBLE_BECOME_ALLOW_SAME_USER": "1"})):
        dests = {h: b.work / f"copy-{way}-{h}" / "bundle"
                 for h in ("gpu-a", "gpu-b")}
        for dest in dests.values():
            dest.mkdir(parents=True)
            (dest / "stale.tar").write_text("an older bundle's file")
        rc, out, err, raw = bed.run_ansible(
            ["ansible", "gpunode_gpu_nodes", "-i", str(inventory), "-m",
             "gpunode.gpunode.gpunode_bundle_copy", "-a",
             f"src={src} dest={b.work}/copy-{way}-{{{{ inventory_hostname }}}}"
             f"/bundle sha256={'0' * 64} cache={b.work / 'copy-cache'}",
             *extra], b.work, env=env)
        results = {host: r for _, _, host, r in fc.task_results(out)}
        checks.check(f"bundle copy ({way}): rc 0", rc == 0,
                     err[-2000:] + raw[-2000:])
        for host, dest in dests.items():
            r = results.get(host, {})
            got = {p.relative_to(dest): p.read_bytes()
                   for p in dest.rglob("*") if p.is_file()} \
                if dest.is_dir() else {}
            checks.check(f"bundle copy ({way}): {host} went by {way}, "
                         "changed", r.get("method") == way and
                         r.get("changed") is True, str(r)[:1000])
            checks.check(f"bundle copy ({way}): {host}'s directory is the "
                         "bundle, whole, the stale file gone", got == want,
                         str(sorted(got)))
            checks.check(f"bundle copy ({way}): nothing left beside it on "
                         f"{host}", sorted(os.listdir(dest.parent)) ==
                         ["bundle"], str(os.listdir(dest.parent)))


def converge(checks, b):
    """Time-slicing, every bundle setup of a fresh fleet. a: check mode on a
    fresh k3s cluster (RuntimeClass nvidia already there, as k3s ships it)
    changes nothing yet shows each node's plan: gpu-a plans with its own
    installed gpunode, gpu-b (no gpunode before the copy) says it would copy
    the bundle and plan after; b: the first run brings every GPU node to
    GPUs x 8 (gpu-b over SSH, running the bundle's binary only as the
    controller-verified private copy); c: replicas 8 -> 4 on every node, the
    fleet check judging 4; d: a rerun changes nothing; e: a bad
    GPUNODE_TIMEOUT in gpu-a's gpunode_environment fails gpu-a at the
    bundle's verify with gpunode's message and fix, and the bundle is not
    copied again (a new copy would not mend a setting)."""
    bundle, pub = b.make_bundle(b.work / "bundle")
    gpus = {"gpu-a": 1, "gpu-b": 2}
    installed = installed_gpunode(b)
    with bed.Sshd(b.work / "sshd") as sshd:
        def node(name, **extra):
            return b.host_vars(
                name, gpunode_bundle_src=str(bundle),
                gpunode_bundle_dir=f"{b.work}/on-{name}/bundle",
                gpunode_trust_keys=[str(pub)], **extra)
        a_env = dict(b.nodes["gpu-a"][1])
        a_env["PATH"] = f"{installed}:{a_env['PATH']}"

        def inventory(replicas, all_nodes=False, gpu_a_env=a_env):
            return b.write_inventory(
                {"server": node("server")},
                # gpu-a: gpunode installed on its PATH; gpu-b: none of its
                # own, over SSH, with become (su: root needs no password
                # for it, so no sudoers file is touched here).
                {"gpu-a": node("gpu-a", gpunode_binary="",
                               gpunode_environment=gpu_a_env),
                 "gpu-b": node("gpu-b", gpunode_binary="", ansible_become=True,
                               ansible_become_method="su", **sshd.vars())},
                other=["cpu-1"],
                all_vars={"gpunode_variant": "time-slicing",
                          "gpunode_replicas": replicas,
                          "gpunode_all_nodes": all_nodes,
                          "gpunode_controller_binary": str(bed.BUILD / "gpunode"),
                          "gpunode_controller_cache": str(b.work / "cache")})

        fc.kubectl_apply(K3S_RUNTIMECLASS)
        before = fc.cluster_objects()
        rc, out, err, raw = bed.playbook(inventory(8), b.work, "--check",
                                         "--diff")
        checks.check("check mode: playbook rc 0", rc == 0, err[-3000:] + raw[-3000:])
        checks.check("check mode: no cluster object written",
                     fc.cluster_objects() == before,
                     f"{before} -> {fc.cluster_objects()}")
        for name in ("server", *gpus):
            checks.check(f"check mode: no bundle copy on {name}",
                         not (b.work / f"on-{name}").exists())
        checks.check("check mode: no tar made on the controller",
                     not any((b.work / "cache").glob("*.tar*")))
        cluster = [r for _, _, host, r in fc.task_results(out, "Cluster part")
                   if "gpunode" in r]
        cluster = cluster[-1] if cluster else {}
        diff = " ".join(d.get("after", "") for d in cluster.get("diff") or [])
        checks.check("check mode: the cluster part's diff names the "
                     "DaemonSet and ConfigMap it would create",
                     "DaemonSet" in diff and "ConfigMap" in diff,
                     str(cluster.get("diff"))[:1000])
        results = fc.gpunode_results(out, "node")
        a = results.get("gpu-a", {})
        checks.check("check mode: gpu-a's plan (its own gpunode) would "
                     "change, the stages after the cluster part as would",
                     a.get("changed") is True and not a.get("failed") and
                     any("would: runtimeclass, plugin, allocatable" in w
                         for w in a.get("warnings", [])), str(a)[:1500])
        checks.check("check mode: gpu-a planned with its installed gpunode",
                     gpunode_cmds(out, "gpu-a") == [str(installed / "gpunode")],
                     str(gpunode_cmds(out, "gpu-a")))
        bres = [r for _, t, h, r in fc.task_results(out, "Node part")
                if h == "gpu-b" and "Node part (" in t]
        checks.check("check mode: gpu-b would copy the bundle, plan after",
                     bool(bres) and bres[-1].get("changed") is True and
                     not bres[-1].get("failed") and "would copy the bundle "
                     "to this node, then plan" in bres[-1].get("msg", ""),
                     str(bres)[:1500])
        entries = fc.summary(out)
        for name in gpus:
            checks.check(f"check mode: summary has {name} changed (would)",
                         entries.get(name, {}).get("outcome") == "changed",
                         str(entries.get(name)))
        after = fc.cluster_objects()["labels"]
        checks.check("check mode: no node labelled",
                     all(after.get(n) == [] for n in ("gpu-a", "gpu-b", "cpu-1")),
                     str(after))

        rc, out, err, raw = bed.playbook(inventory(8), b.work)
        checks.check("first run: playbook rc 0", rc == 0, err[-3000:] + raw[-3000:])
        st = fc.stats(out)
        for name in gpus:
            checks.check(f"first run: {name} changed", st.get(name, {})
                         .get("changed", 0) > 0, str(st.get(name)))
        checks.check("first run: cpu-1 not in the play", "cpu-1" not in st,
                     str(st.keys()))
        expect_converged(checks, "first run", gpus, ["cpu-1", "server"],
                         replicas=8)
        cmds = gpunode_cmds(out, "gpu-b")
        checks.check("first run: gpu-b ran only private copies of the "
                     "bundle's verified bin/gpunode",
                     bool(cmds) and all(
                         c != f"{b.work}/on-gpu-b/bundle/bin/gpunode" and
                         "/gpunode-" in c for c in cmds), str(cmds))
        entries = fc.summary(out)
        for name in gpus:
            checks.check(f"first run: summary has {name} changed",
                         entries.get(name, {}).get("outcome") == "changed",
                         str(entries.get(name)))

        rc, out, err, raw = bed.playbook(inventory(4, True), b.work)
        checks.check("replicas 8 -> 4: playbook rc 0", rc == 0,
                     err[-3000:] + raw[-3000:])
        expect_converged(checks, "replicas 8 -> 4", gpus, replicas=4)
        entries = fc.summary(out)
        checks.check("replicas 8 -> 4: the fleet check judged 4 and found "
                     "every node done", all(
                         entries.get(n, {}).get("outcome") in ("ok", "changed")
                         for n in gpus), str(entries))

        rc, out, err, raw = bed.playbook(inventory(4, True), b.work)
        checks.check("rerun: playbook rc 0", rc == 0, err[-3000:] + raw[-3000:])
        st = fc.stats(out)
        for host in ("server", *gpus, "localhost"):
            checks.check(f"rerun: changed=0 on {host}",
                         host in st and st[host].get("changed") == 0,
                         str(st.get(host)))
        entries = fc.summary(out)
        for name in gpus:
            checks.check(f"rerun: summary has {name} ok",
                         entries.get(name, {}).get("outcome") == "ok",
                         str(entries.get(name)))

        rc, out, err, raw = bed.playbook(inventory(
            4, True, dict(a_env, GPUNODE_TIMEOUT="bogus")), b.work)
        checks.check("bad GPUNODE_TIMEOUT: playbook fails", rc != 0,
                     err[-3000:] + raw[-3000:])
        again = [t for _, t, h, r in fc.task_results(out)
                 if h == "gpu-a" and not r.get("skipped") and
                 ("Copy the bundle again" in t or
                  "Verify the bundle again" in t)]
        checks.check("bad GPUNODE_TIMEOUT: no second copy or verify on "
                     "gpu-a", not again, str(again))
        a = fc.summary(out).get("gpu-a", {})
        checks.check("bad GPUNODE_TIMEOUT: the summary names it, with a fix "
                     "naming the role variable",
                     a.get("outcome") == "failed" and
                     "GPUNODE_TIMEOUT: expected a positive duration" in
                     a.get("message", "") and
                     "gpunode_timeout, when given, overrides it" in
                     (a.get("fix") or ""), str(a))
        checks.check("bad GPUNODE_TIMEOUT: gpu-b ok",
                     fc.summary(out).get("gpu-b", {}).get("outcome") == "ok",
                     str(fc.summary(out).get("gpu-b")))


def broken_handler(checks, b):
    """d: gpu-bad (no nvidia handler) fails with the diagnosis, gpu-a
    converges, the summary names gpu-bad's layer and fix."""
    inventory = b.write_inventory(
        {"server": b.host_vars("server", gpunode_image_archive=str(b.archive))},
        {n: b.host_vars(n, gpunode_image_archive=str(b.archive))
         for n in ("gpu-a", "gpu-bad")},
        # One batch (the default serial 2); one failure of two is within the
        # playbook's max_fail_percentage 50.
    )
    rc, out, err, raw = bed.playbook(inventory, b.work)
    checks.check("playbook rc 2 (a host failed)", rc == 2, f"rc {rc}")
    st = fc.stats(out)
    checks.check("gpu-bad failed", st.get("gpu-bad", {}).get("failures", 0) > 0,
                 str(st.get("gpu-bad")))
    checks.check("gpu-a did not fail", st.get("gpu-a", {}).get("failures") == 0,
                 str(st.get("gpu-a")))
    failure = (fc.gpunode_results(out, "node").get("gpu-bad", {})
               .get("gpunode") or {}).get("failure") or {}
    checks.check("gpu-bad's failure is at layer handler",
                 failure.get("layer") == "handler" or
                 failure.get("stage") == "handler", str(failure))
    checks.check("gpu-bad's failure names a fix", bool(failure.get("fix")),
                 str(failure))
    expect_converged(checks, "after", {"gpu-a": 1})
    entries = fc.summary(out)
    bad = entries.get("gpu-bad", {})
    checks.check("summary: gpu-bad failed at handler",
                 bad.get("outcome") == "failed" and
                 "handler" in (bad.get("layer"), bad.get("stage")), str(bad))
    checks.check("summary: gpu-bad's fix", bool(bad.get("fix")), str(bad))
    checks.check("summary: gpu-a converged",
                 entries.get("gpu-a", {}).get("outcome") == "changed",
                 str(entries.get("gpu-a")))

    # serial 1: gpu-bad's batch fails entirely, so Ansible ends the playbook
    # there (no summary play); the rollout_summary callback still says why.
    # As an operator sees it: the default stdout callback.
    def human_run(*extra):
        env = bed.ansible_env(b.work)
        for key in ("ANSIBLE_STDOUT_CALLBACK", "ANSIBLE_CALLBACK_PLUGINS",
                    "ANSIBLE_LOAD_CALLBACK_PLUGINS"):
            env.pop(key)
        env["ANSIBLE_CALLBACKS_ENABLED"] = "gpunode.gpunode.rollout_summary"
        done = subprocess.run(
            ["ansible-playbook", bed.PLAYBOOK, "-i", str(inventory), *extra],
            capture_output=True, text=True, env=env, timeout=240,
            stdin=subprocess.DEVNULL)
        return done.returncode, done.stdout
    rc, text = human_run("-e", "gpunode_serial=1")
    banner = "GPUNODE ROLLOUT SUMMARY (the playbook ended before its summary play)"
    checks.check("serial 1: the playbook ended at gpu-bad's batch", rc == 2 and
                 "TASK [gpunode.gpunode.gpunode : Summary]" not in text,
                 f"rc {rc}")
    checks.check("serial 1: the callback's summary is printed", banner in text,
                 text[-2000:])
    checks.check("serial 1: it names gpu-bad's layer",
                 "gpu-bad (node part): failed at handler (containerd runtime "
                 "handler)" in text, text[-2000:])
    checks.check("serial 1: and gpu-a's outcome",
                 "gpu-a (node part): ok" in text, text[-2000:])
    rc, text = human_run()
    checks.check("serial 2: the summary play ran, the callback is silent",
                 rc == 2 and banner not in text and
                 "gpu-bad (node part): failed at handler" in text,
                 text[-2000:])


def serial(checks, b):
    """e: gpunode_serial 3 from the inventory (not -e) over 6 GPU nodes: two
    node-part batches of three; time-slicing, 2 replicas, renamed to
    nvidia.com/gpu.shared: all converge, and the fleet check judges that."""
    names = [f"gpu-{i}" for i in range(1, 7)]
    inventory = b.write_inventory(
        {"server": b.host_vars("server", gpunode_image_archive=str(b.archive))},
        {n: b.host_vars(n, gpunode_image_archive=str(b.archive))
         for n in names},
        # `serial` is templated before any host is chosen, so an inventory
        # variable never reaches it directly (ansible/ansible#27166,
        # #18131); the playbook's first play carries it over.
        all_vars={"gpunode_serial": 3, "gpunode_variant": "time-slicing",
                  "gpunode_replicas": 2, "gpunode_rename_shared": True})
    rc, out, err, raw = bed.playbook(inventory, b.work)
    checks.check("playbook rc 0", rc == 0, err[-3000:] + raw[-3000:])
    batches = fc.node_part_plays(out)
    checks.check("node part ran in 2 batches (gpunode_serial 3 from the "
                 "inventory)", [len(x) for x in batches] == [3, 3],
                 str(batches))
    checks.check("batches cover the 6 nodes once",
                 sorted(h for x in batches for h in x) == sorted(names),
                 str(batches))
    expect_converged(checks, "after", {n: 1 for n in names}, replicas=2,
                     resource="nvidia.com/gpu.shared")
    entries = fc.summary(out)
    checks.check("summary: every node changed (the check judged "
                 "nvidia.com/gpu.shared x 2)",
                 all(entries.get(n, {}).get("outcome") == "changed"
                     for n in names), str(entries))


def killed(checks, b):
    """f: gpu-k killed by SIGKILL right after its labels write, gpu-s
    unreachable (its sshd stopped); gpu-a and gpu-b go on; the summary names
    both; a rerun with the sshd back and no crash converges. The batches of
    the default serial 2 are [gpu-a, gpu-k] and [gpu-b, gpu-s]: one failure
    each, within the playbook's max_fail_percentage 50 (a batch ends the
    rollout only when more than that fails)."""
    archive = {"gpunode_image_archive": str(b.archive)}
    bundle, pub = b.make_bundle(b.work / "bundle")
    # gpu-s gets the bundle copied: the copy's first task meets it
    # unreachable, before any gpunode module.
    copied = {"gpunode_bundle_src": str(bundle),
              "gpunode_bundle_dir": f"{b.work}/on-gpu-s/bundle",
              "gpunode_trust_keys": [str(pub)]}
    # The controller's settings are the play's (its first host's).
    controller = {"gpunode_controller_binary": str(bed.BUILD / "gpunode"),
                  "gpunode_controller_trust_keys": [str(pub)],
                  "gpunode_controller_cache": str(b.work / "cache")}

    def inventory(crash, sshd):
        k_env = dict(b.nodes["gpu-k"][1])
        binary = "gpunode"
        if crash:
            k_env["GPUNODE_TEST_CRASH_AT"] = "api-write-done"
            binary = "gpunode_hooked"
        return b.write_inventory(
            {"server": b.host_vars("server", **archive)},
            {"gpu-a": b.host_vars("gpu-a", **archive),
             "gpu-k": b.host_vars("gpu-k", binary,
                                  gpunode_environment=k_env, **archive),
             "gpu-b": b.host_vars("gpu-b", **archive),
             "gpu-s": b.host_vars("gpu-s", **copied, **sshd.vars())},
            all_vars=controller)

    with bed.Sshd(b.work / "sshd") as sshd:
        sshd.stop()
        rc, out, err, raw = bed.playbook(inventory(True, sshd), b.work)
    # 4, not 2: an unreachable host outranks a failed one
    # (ansible/plugins/strategy/__init__.py, StrategyBase.run).
    checks.check("killed run: playbook rc 4", rc == 4, f"rc {rc}")
    st = fc.stats(out)
    checks.check("gpu-s unreachable",
                 st.get("gpu-s", {}).get("unreachable", 0) > 0,
                 str(st.get("gpu-s")))
    checks.check("gpu-k failed", st.get("gpu-k", {}).get("failures", 0) > 0,
                 str(st.get("gpu-k")))
    killed_msg = " ".join(r.get("msg", "") for play, _, host, r
                          in fc.task_results(out, "Node part")
                          if host == "gpu-k" and r.get("failed"))
    checks.check("gpu-k's failure says it was killed", "killed" in killed_msg,
                 killed_msg)
    expect_converged(checks, "killed run", {"gpu-a": 1, "gpu-b": 1})
    entries = fc.summary(out)
    for node, outcome in (("gpu-s", "unreachable"), ("gpu-k", "failed"),
                          ("gpu-a", "changed"), ("gpu-b", "changed")):
        checks.check(f"summary: {node} {outcome}",
                     entries.get(node, {}).get("outcome") == outcome,
                     str(entries.get(node)))
    checks.check("gpu-s was met unreachable by the bundle copy's first task",
                 any(h == "gpu-s" and r.get("unreachable") and
                     "The node's bundle.toml" in t
                     for _, t, h, r in fc.task_results(out)), raw[-2000:])
    with bed.Sshd(b.work / "sshd2") as sshd:
        rc, out, err, raw = bed.playbook(inventory(False, sshd), b.work)
    checks.check("rerun: playbook rc 0", rc == 0, err[-3000:] + raw[-3000:])
    expect_converged(checks, "rerun", {"gpu-a": 1, "gpu-k": 1, "gpu-b": 1,
                                       "gpu-s": 1})
    entries = fc.summary(out)
    # gpu-k's labels went in before the kill: its rerun may find nothing
    # left to write.
    checks.check("rerun: summary has gpu-k done, gpu-s changed",
                 entries.get("gpu-k", {}).get("outcome") in ("ok", "changed")
                 and entries.get("gpu-s", {}).get("outcome") == "changed",
                 str(entries))


def readonly(checks, b):
    """g: the bundle already on the node, on read-only media (a read-only
    bind mount), as gpunode_bundle_dir."""
    bundle, pub = b.make_bundle(b.work / "bundle")
    media = b.work / "media"
    media.mkdir()
    # mount(8): a bind mount is made read-only by a remount.
    mounted = subprocess.run(["mount", "--bind", str(bundle), str(media)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        bed.skip(f"mount --bind not permitted here: {mounted.stderr.strip()}")
    try:
        ro = subprocess.run(["mount", "-o", "remount,bind,ro", str(media)],
                            capture_output=True, text=True)
        if ro.returncode != 0:
            bed.skip(f"read-only remount not permitted: {ro.stderr.strip()}")
        checks.check("the media is read-only",
                     not os.access(media, os.W_OK) or
                     _write_refused(media), "a write went through")
        # gpunode_binary empty and no gpunode on the node's PATH, as on a
        # node with nothing but the stick: the controller verifies its own
        # copy of the bundle (gpunode_bundle_src, the same bundle: nothing
        # is copied), and the node runs the stick's bin/gpunode only as a
        # private copy whose hash that verified bundle.toml records.
        def inventory(stick):
            on_media = {"gpunode_bundle_dir": str(stick),
                        "gpunode_bundle_src": str(bundle),
                        "gpunode_trust_keys": [str(pub)], "gpunode_binary": "",
                        "gpunode_controller_binary": str(bed.BUILD / "gpunode"),
                        "gpunode_controller_cache": str(b.work / "cache")}
            return b.write_inventory(
                {"server": b.host_vars("server", **on_media)},
                {"gpu-a": b.host_vars("gpu-a", **on_media)})
        before = fc.cluster_objects()
        rc, out, err, raw = bed.playbook(inventory(media), b.work, "--check",
                                         "--diff")
        checks.check("check mode: playbook rc 0", rc == 0,
                     err[-3000:] + raw[-3000:])
        a = fc.gpunode_results(out, "node").get("gpu-a", {})
        checks.check("check mode: gpu-a's plan would change, not failed",
                     a.get("changed") is True and not a.get("failed"),
                     str(a)[:1500])
        checks.check("check mode: nothing written",
                     fc.cluster_objects() == before)
        rc, out, err, raw = bed.playbook(inventory(media), b.work)
        checks.check("playbook rc 0", rc == 0, err[-3000:] + raw[-3000:])
        expect_converged(checks, "after", {"gpu-a": 1})
        ran = sorted(set((host, (r.get("cmd") or [""])[0])
                         for _, _, host, r in fc.task_results(out)
                         if r.get("cmd") and host != "localhost"))
        checks.check("every gpunode run on a node was a private copy of the "
                     "stick's verified bin/gpunode",
                     bool(ran) and all(cmd != f"{media}/bin/gpunode" and
                                       "/gpunode-" in cmd for _, cmd in ran),
                     str(ran))
        checks.check("nothing was copied onto the media",
                     not any("Copy the bundle" in t and
                             r.get("changed")
                             for _, t, _, r in fc.task_results(out)))

        # A stick whose bin/gpunode was swapped for a script: the script
        # never runs. With the verified bundle on the controller the role
        # refuses the node's copy, then copies the verified bundle over it
        # once (as it heals a copy cut short) and converges.
        swapped = b.work / "swapped"
        shutil.copytree(bundle, swapped)
        marker = b.work / "the-stick-binary-ran"
        script = swapped / "bin" / "gpunode"

        def swap():
            script.unlink()
            script.write_text(f"#!/bin/sh\ntouch {marker}\n")
            script.chmod(0o755)
        swap()
        rc, out, err, raw = bed.playbook(inventory(swapped), b.work)
        checks.check("swapped stick, bundle on the controller: rc 0 (healed "
                     "from the verified bundle)", rc == 0,
                     err[-3000:] + raw[-3000:])
        checks.check("swapped stick, bundle on the controller: the script "
                     "never ran", not marker.exists())
        refused = [r.get("msg", "") for _, t, h, r in fc.task_results(out)
                   if h == "gpu-a" and r.get("failed") and
                   "Verify the bundle" in t]
        checks.check("swapped stick, bundle on the controller: the node's "
                     "binary was refused first, its hash named",
                     any("is not the" in m and "the verified bundle.toml "
                         "records" in m for m in refused), str(refused))

        # The same stick with nothing on the controller and no gpunode on
        # the node: refused, nothing runs.
        swap()
        plain = b.write_inventory(
            {"server": b.host_vars("server")},
            {"gpu-a": b.host_vars("gpu-a", gpunode_bundle_dir=str(swapped),
                                  gpunode_trust_keys=[str(pub)],
                                  gpunode_binary="")}, name="plain.json")
        rc, out, err, raw = bed.playbook(plain, b.work)
        checks.check("swapped stick alone: playbook rc 2", rc == 2, f"rc {rc}")
        checks.check("swapped stick alone: the script never ran",
                     not marker.exists())
        row = fc.summary(out).get("gpu-a", {})
        checks.check("swapped stick alone: gpu-a failed at bundle, no "
                     "trusted gpunode verified it",
                     row.get("outcome") == "failed" and
                     row.get("stage") == "bundle" and
                     "no trusted gpunode has verified this bundle" in
                     (row.get("message") or ""), str(row))
    finally:
        subprocess.run(["umount", str(media)], check=False)


def _write_refused(path):
    try:
        (pathlib.Path(path) / ".probe").write_text("x")
    except OSError:
        return True
    return False


CASES = {"bed": bed_case, "converge": converge, "broken-handler": broken_handler,
         "serial": serial, "killed": killed, "readonly": readonly}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in CASES:
        print(f"usage: fleet_cases.py {'|'.join(CASES)} SIM_DIR",
              file=sys.stderr)
        return 2
    case, sim_dir = sys.argv[1], sys.argv[2]
    bed.require_tools()
    work = pathlib.Path(sim_dir) / "work"
    shutil.rmtree(work, ignore_errors=True)  # a previous run's
    work.mkdir(parents=True)
    checks = fc.Checks(case)
    CASES[case](checks, bed.Bed(sim_dir, work))
    return checks.exit_code()


if __name__ == "__main__":
    sys.exit(main())
