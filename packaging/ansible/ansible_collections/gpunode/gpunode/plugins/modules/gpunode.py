#!/usr/bin/python
# -*- coding: utf-8 -*-
# The gpunode module: runs `gpunode install` (or `uninstall`) on the node
# and reports it in Ansible's terms. Check mode runs `gpunode plan`, which
# changes nothing (the API server's dry run included); diff mode shows what
# the plan would change.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: gpunode
short_description: Bring an NVIDIA GPU node on k3s to the point where Pods can use its GPUs
version_added: 0.1.0
description:
  - Runs C(gpunode install) on the node, which checks each layer bottom-up
    (driver, container toolkit, containerd's C(nvidia) handler, RuntimeClass,
    device plugin image, GPU labels, device plugin, allocatable) and changes only
    what is missing. It is safe to rerun after any failure.
  - The result is C(changed) only when gpunode wrote something, so a converged
    rerun reports C(changed=false).
  - A failure names the lowest broken layer, what is wrong and the fix, as
    gpunode's own C([ERROR layer]) line does.
  - On a k3s agent gpunode does the node part with the kubelet's own identity
    (C(scope=node)); the cluster part (RuntimeClass, DaemonSet, ConfigMap) runs
    once, on a server, with C(scope=cluster). See the role
    C(gpunode.gpunode.gpunode) and the playbook C(gpunode.gpunode.rollout).
  - In check mode it runs C(gpunode plan); with C(--diff) it shows, for each
    layer that would change, the state now and after (each GPU node's slots for
    the device plugin). C(state=absent) has no plan; in check mode it is skipped.
  - In check mode on a node whose cluster part has not run yet (the playbook's
    check run plans it just before), the node's plan leaves out the RuntimeClass,
    the plugin pod and the slots, which need the cluster part's objects, and
    plans the rest (the image, the labels); those stages are reported as
    C(would), with a warning, not as failed. C(cluster_part_pending) says the
    cluster part's plan would still change something.
  - In check mode with the bundle still to be copied (C(bundle_pending)) and
    no gpunode on the node to plan with, it reports that it would copy the
    bundle and plan after the copy (changed, not failed).
extends_documentation_fragment:
  - gpunode.gpunode.common
options:
  state:
    description:
      - C(present) runs C(gpunode install); C(absent) runs C(gpunode uninstall),
        which removes what gpunode installed (on an agent, only its GPU labels)
        and leaves the driver, the toolkit and k3s alone.
    type: str
    choices: [present, absent]
    default: present
  scope:
    description:
      - Which part to do. C(node) is this host and its own Node's labels, with
        the kubelet's identity; C(cluster) the RuntimeClass, device plugin
        DaemonSet and ConfigMap, then the wait for every GPU node (needs an admin
        kubeconfig); C(both) everything.
      - Default is gpunode's own by the host's role, C(node) on a k3s agent and
        C(both) elsewhere.
      - With C(state=absent), the part taken back, C(node) this node's GPU labels
        and images, C(cluster) the cluster's objects.
    type: str
    choices: [node, cluster, both]
  kubeconfig:
    description:
      - Kubeconfig to reach the cluster (a host path, under C(root)). Default is
        the kubelet's own for the node part on an agent, else the admin
        C(/etc/rancher/k3s/k3s.yaml).
    type: path
  node:
    description:
      - Kubernetes node name of this host. Default is C(node-name) from
        C(/etc/rancher/k3s/config.yaml), else the host name.
    type: str
  variant:
    description:
      - Device plugin manifest. C(default) gives one slot per GPU; C(time-slicing)
        gives C(replicas) slots per GPU. The same for every GPU node, since one
        DaemonSet serves them all.
      - Default is the cluster's current setting on an agent, C(default) in the
        cluster part.
    type: str
    choices: [default, time-slicing]
  replicas:
    description:
      - Time-slicing slots per GPU (at least 2; gpunode's default is 8). Only with
        C(variant=time-slicing).
    type: int
  rename_shared:
    description:
      - Advertise C(nvidia.com/gpu.shared) instead of C(nvidia.com/gpu)
        (time-slicing only).
    type: bool
    default: false
  all_nodes:
    description:
      - Allow a change of variant or replicas that restarts the device plugin on
        other GPU nodes too. Without it gpunode refuses such a change.
    type: bool
    default: false
  image_archive:
    description:
      - Device plugin image archive on the node, instead of the bundle's.
    type: path
  replace_existing:
    description:
      - Remove another NVIDIA device plugin DaemonSet (a Helm release) first.
    type: bool
    default: false
  restart_k3s:
    description:
      - Restart k3s (or k3s-agent) when containerd lacks the C(nvidia) runtime
        although the toolkit is installed. Without it gpunode names the command.
    type: bool
    default: false
  upgrade_toolkit:
    description:
      - Install the bundle's NVIDIA container toolkit packages over another
        version already on the node (older or newer). Without it gpunode
        keeps the installed version and warns.
    type: bool
    default: false
  min_driver:
    description:
      - Lowest acceptable NVIDIA driver version, e.g. C(550.54.15).
    type: str
  timeout:
    description:
      - How long gpunode may wait for the cluster (for example C(10m), C(90s)).
      - Unset, gpunode's own setting holds (C(GPUNODE_TIMEOUT), else the
        site's C(config.toml), else 10m).
    type: str
  smoke:
    description:
      - Finally run a CUDA Pod and require C(Test PASSED) in its log (a run of
        both parts only).
    type: bool
    default: false
  only:
    description:
      - Run only these stages (C(gpunode version) lists them); the others are
        reported as skipped.
    type: list
    elements: str
    default: []
  skip:
    description:
      - Skip these stages.
    type: list
    elements: str
    default: []
  bundle_pending:
    description:
      - Check mode only. The bundle is still to be copied to this node (the
        role's C(gpunode_bundle_src)); with no gpunode here to plan with, the
        result says it would copy the bundle and plan after the copy.
    type: bool
    default: false
  cluster_part_pending:
    description:
      - Check mode only. The cluster part's plan in this same check run would
        still create or change the RuntimeClass, the device plugin DaemonSet
        or its ConfigMap, so this node's stages that read them (C(runtimeclass),
        C(plugin), C(allocatable)) are planned as C(would), not failed.
    type: bool
    default: false
  keep_image:
    description:
      - With C(state=absent), keep the device plugin image in containerd.
    type: bool
    default: false
notes:
  - Supports check mode (C(gpunode plan)) and diff mode.
  - Runs the gpunode binary with C(--json) and reads its event schema version 1
    (docs/json-events.md); a gpunode speaking another schema is refused.
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
author:
  - gpunode maintainers
'''

EXAMPLES = r'''
- name: The cluster part, once, on a server
  gpunode.gpunode.gpunode:
    scope: cluster
    bundle: /media/usb/gpunode-bundle
  run_once: true
  become: true

- name: The node part on each GPU agent, from the stick
  gpunode.gpunode.gpunode:
    scope: node
    bundle: /media/usb/gpunode-bundle
    trust_keys: [/etc/gpunode/trusted-keys/site.pub]
  become: true

- name: Time-slicing, 4 slots per GPU, on every GPU node
  gpunode.gpunode.gpunode:
    scope: cluster
    variant: time-slicing
    replicas: 4
    all_nodes: true
  run_once: true
  become: true
'''

RETURN = r'''
cmd:
  description: The gpunode command line that ran (the last one, in check or diff mode).
  returned: always
  type: list
  elements: str
gpunode:
  description: The run in brief, every text field with control characters escaped.
  returned: always
  type: dict
  contains:
    command:
      description: C(install), C(plan) (check mode) or C(uninstall).
      type: str
    exit_code:
      description: gpunode's exit code (0 done, 1 blocked, 2 bad input, 3 timed out, 4 bundle integrity, 5 cannot run).
      type: int
    status:
      description: C(done), C(blocked), C(invalid-input), C(timed-out), C(integrity-failure), C(cannot-run).
      type: str
    summary:
      description: gpunode's one-line summary.
      type: str
    scope:
      description: The part this run did, C(node), C(cluster) or C(both).
      type: str
    role:
      description: This host's k3s role, C(server), C(agent) or C(none).
      type: str
    stages:
      description: Each stage with its status, code, summary and fix.
      type: list
      elements: dict
    failure:
      description: The diagnosis when not done, with C(stage), C(layer), C(code), C(message) and C(fix); null when done.
      type: dict
    warnings:
      description: gpunode's warnings, each prefixed with the layer that gave it.
      type: list
      elements: str
ansible_facts:
  description: What the run found.
  returned: always
  type: dict
  contains:
    gpunode:
      description: The facts of M(gpunode.gpunode.gpunode_facts), from this run's checks.
      type: dict
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpunode.gpunode.plugins.module_utils.gpunode_events import (
    facts,
    failure,
    failure_message,
    plan_diff,
    summary,
    would_write,
    wrote_something,
)
from ansible_collections.gpunode.gpunode.plugins.module_utils.gpunode_run import (
    COMMON_ARGS,
    VARIANTS,
    binary_of,
    option_flags,
    root_flags,
    run_gpunode,
    trust_flags,
)


# install's and plan's options, in gpunode's own names.
STAGE_OPTIONS = (
    ('scope', '--scope'), ('kubeconfig', '--kubeconfig'), ('node', '--node'),
    ('variant', '--variant'), ('replicas', '--replicas'),
    ('image_archive', '--image-archive'), ('min_driver', '--min-driver'),
    ('timeout', '--timeout'), ('bundle', '--bundle'), ('only', '--only'),
    ('skip', '--skip'), ('rename_shared', '--rename-shared'),
    ('all_nodes', '--all-nodes'), ('replace_existing', '--replace-existing'),
    ('smoke', '--smoke'))
UNINSTALL_OPTIONS = (('scope', '--scope'), ('kubeconfig', '--kubeconfig'),
                     ('timeout', '--timeout'), ('keep_image', '--keep-image'))


def stage_flags(p, command):
    """install's flags, or plan's (the same less --restart-k3s, an action)."""
    argv = root_flags(p) + trust_flags(p) + option_flags(p, STAGE_OPTIONS)
    if command == 'install':
        argv += option_flags(p, (('restart_k3s', '--restart-k3s'),
                                 ('upgrade_toolkit', '--upgrade-toolkit')))
    return argv


def uninstall_flags(p):
    return root_flags(p) + option_flags(p, UNINSTALL_OPTIONS)


def main():
    argument_spec = dict(COMMON_ARGS)
    argument_spec.update(
        state=dict(type='str', default='present', choices=['present', 'absent']),
        scope=dict(type='str', choices=['node', 'cluster', 'both']),
        kubeconfig=dict(type='path'),
        node=dict(type='str'),
        variant=dict(type='str', choices=list(VARIANTS)),
        replicas=dict(type='int'),
        rename_shared=dict(type='bool', default=False),
        all_nodes=dict(type='bool', default=False),
        image_archive=dict(type='path'),
        replace_existing=dict(type='bool', default=False),
        restart_k3s=dict(type='bool', default=False),
        upgrade_toolkit=dict(type='bool', default=False),
        min_driver=dict(type='str'),
        timeout=dict(type='str'),
        smoke=dict(type='bool', default=False),
        keep_image=dict(type='bool', default=False),
        cluster_part_pending=dict(type='bool', default=False),
        bundle_pending=dict(type='bool', default=False),
        only=dict(type='list', elements='str', default=[]),
        skip=dict(type='list', elements='str', default=[]),
    )
    module = AnsibleModule(argument_spec=argument_spec,
                           supports_check_mode=True)
    p = module.params
    gpunode = binary_of(module)

    if p['state'] == 'absent':
        if module.check_mode:
            module.exit_json(skipped=True, changed=False,
                             msg='gpunode uninstall has no plan: check mode '
                             'cannot tell what it would remove')
        run = run_gpunode(module, [gpunode, 'uninstall', '--json'] +
                          uninstall_flags(p))
        finish(module, run, wrote_something(run.events, run.result))

    if gpunode is None:
        # Check mode, the bundle still to be copied, no gpunode here yet.
        module.exit_json(changed=True, msg=PLAN_AFTER_COPY, gpunode=dict(
            command='plan', status='would-copy-bundle', scope=p['scope'],
            summary=PLAN_AFTER_COPY, failure=None, warnings=[], stages=[]))

    plan = None
    if module.check_mode or module._diff:
        # plan changes nothing: the API server's dry run stands in for the
        # writes. Without check mode it runs first only to give the diff.
        plan = run_gpunode(module, [gpunode, 'plan', '--json'] +
                           stage_flags(p, 'plan'))
        if module.check_mode:
            if waits_on_cluster_part(plan, p['cluster_part_pending']):
                plan = plan_without_cluster_part(module, gpunode, p)
                finish(module, plan, True, plan)
            finish(module, plan, would_write(plan.events), plan)
    run = run_gpunode(module, [gpunode, 'install', '--json'] +
                      stage_flags(p, 'install'))
    finish(module, run, wrote_something(run.events, run.result), plan)


PLAN_AFTER_COPY = ('check mode: would copy the bundle to this node, then plan '
                   'from it; no gpunode is on this node before the copy, so '
                   'the plan comes after it')

# Where a node's plan stops when the cluster part is still to be made: in
# check mode the playbook plans the cluster part before the node parts, so
# the RuntimeClass and the DaemonSet exist only as a plan. k3s already
# ships RuntimeClass nvidia, so the node's plan then stops later, at the
# plugin pod or the slots (no plugin pod runs on this node yet).
CLUSTER_PART_MISSING = 'runtimeclass.cluster-part'
CLUSTER_PART_STAGES = ('runtimeclass', 'plugin', 'allocatable')


def waits_on_cluster_part(run, cluster_part_pending):
    what = failure(run.events, run.result)
    if what is None:
        return False
    if what.get('code') == CLUSTER_PART_MISSING:
        return True
    return cluster_part_pending and what.get('stage') in CLUSTER_PART_STAGES


def plan_without_cluster_part(module, gpunode, p):
    """This node's plan as it will be once the cluster part has run: the
    stages that read the cluster part's objects (the RuntimeClass, the
    plugin pod, the slots) are left out, so the image and the labels are
    planned. A layer that is broken still fails."""
    params = dict(p, skip=list(p.get('skip') or []) + list(CLUSTER_PART_STAGES))
    run = run_gpunode(module, [gpunode, 'plan', '--json'] +
                      stage_flags(params, 'plan'))
    module.warn('check mode: would: %s follow the cluster part, which has not '
                'run yet; this node\'s plan leaves them out (they read the '
                'RuntimeClass, the DaemonSet and its pod)'
                % ', '.join(CLUSTER_PART_STAGES))
    return run


def finish(module, run, changed, plan=None):
    result = dict(
        changed=changed,
        gpunode=summary(run.result, run.events),
        ansible_facts=dict(gpunode=facts(run.events, run.result)),
        cmd=run.argv,
    )
    # `rc` only on failure: Ansible counts any result with a non-zero rc as
    # failed (gpunode.exit_code has it always).
    if plan is not None and changed:
        result['diff'] = plan_diff(plan.events)
    for warning in result['gpunode']['warnings']:
        module.warn(warning)
    what = result['gpunode']['failure']
    if what is not None:
        result['stderr_tail'] = run.stderr
        result['rc'] = run.rc
        module.fail_json(
            msg=failure_message(run.result.get('command'), run.result, what),
            **result)
    result['msg'] = 'gpunode %s: %s' % (run.result.get('command'),
                                        result['gpunode']['summary'])
    module.exit_json(**result)


if __name__ == '__main__':
    main()
