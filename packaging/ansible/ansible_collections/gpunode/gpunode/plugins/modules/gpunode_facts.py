#!/usr/bin/python
# -*- coding: utf-8 -*-
# gpunode_facts: `gpunode status --json`, read-only, as ansible_facts.gpunode.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: gpunode_facts
short_description: What gpunode finds on a GPU node, as facts
version_added: 0.1.0
description:
  - Runs C(gpunode status --json), which checks every layer read-only, and
    returns what it found as C(ansible_facts.gpunode) (also C(ansible_gpunode)),
    the GPUs, the driver, the device plugin's settings, and the slots this node
    advertises against those it should.
  - With the cluster part (C(scope=cluster) on a server) C(nodes) lists every
    GPU node with its slots expected and advertised, and the lowest broken layer
    of each node that is short.
  - Never changes anything, so C(changed) is always false. A layer that is not
    in place is not a failure here (C(healthy=false)); use C(require_healthy)
    to make it one.
extends_documentation_fragment:
  - gpunode.gpunode.common
options:
  scope:
    description:
      - The part to check, as for M(gpunode.gpunode.gpunode). Default is
        gpunode's own by the host's role.
    type: str
    choices: [node, cluster, both]
  kubeconfig:
    description:
      - Kubeconfig to reach the cluster (a host path, under C(root)).
    type: path
  variant:
    description:
      - The device plugin variant the cluster should run, as rolled out
        (M(gpunode.gpunode.gpunode)'s C(variant)); with C(scope=cluster) each
        GPU node's slots are judged against it. Unset, gpunode's default.
    type: str
    choices: [default, time-slicing]
  replicas:
    description:
      - Time-slicing slots per GPU, as rolled out.
    type: int
  rename_shared:
    description:
      - The slots are advertised as C(nvidia.com/gpu.shared), as rolled out.
    type: bool
    default: false
  only:
    description:
      - Check only these stages (for example C(driver)).
    type: list
    elements: str
    default: []
  require_healthy:
    description:
      - Fail, with gpunode's diagnosis, when a layer is not in place.
    type: bool
    default: false
notes:
  - Supports check mode (it only reads).
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
author:
  - gpunode maintainers
'''

EXAMPLES = r'''
- name: Read the GPU stack
  gpunode.gpunode.gpunode_facts:
  become: true

- name: Every GPU node advertises its slots
  gpunode.gpunode.gpunode_facts:
    scope: cluster
    require_healthy: true
  run_once: true
  become: true

- name: Show the slots
  ansible.builtin.debug:
    msg: "{{ ansible_facts.gpunode.slots }}"
'''

RETURN = r'''
cmd:
  description: The gpunode command line that ran (the last one, in check or diff mode).
  returned: always
  type: list
  elements: str
ansible_facts:
  description: What gpunode status found.
  returned: always
  type: dict
  contains:
    gpunode:
      description: The GPU stack of this node.
      type: dict
      contains:
        healthy:
          description: Every layer is in place (status exited 0).
          type: bool
        schema:
          description: The JSON event schema gpunode spoke.
          type: int
        scope:
          description: The part checked, C(node), C(cluster) or C(both).
          type: str
        role:
          description: This host's k3s role, C(server), C(agent) or C(none).
          type: str
        node:
          description: This host's Kubernetes node name.
          type: str
        driver_version:
          description: The NVIDIA driver's version; null when none answered.
          type: str
        gpu_count:
          description: GPUs the driver sees.
          type: int
        gpus:
          description: One per GPU, with C(index), C(name), C(uuid), C(memory_mib), C(mig_mode).
          type: list
          elements: dict
        cuda:
          description: >-
            CUDA on the host, below any container, with C(checked) (false with
            O(root)), C(outcome) (C(ok), C(system-not-ready), ...) and
            C(version), the CUDA version the driver supports.
          type: dict
        nvswitch:
          description: This is an NVSwitch system (Fabric Manager is needed).
          type: bool
        health:
          description: >-
            Xid errors since boot, uncorrectable ECC errors and pending page
            retirement or row remapping, one per finding with C(gpu), C(kind),
            C(unhealthy) (the device plugin drops the GPU) and C(message).
          type: list
          elements: dict
        image:
          description: The device plugin image, with C(ref), C(digest) and C(pinned).
          type: dict
        plugin:
          description: The device plugin's C(variant), C(replicas) and C(resource).
          type: dict
        slots:
          description: This node's C(resource), C(gpus), C(expected), C(advertised) and C(ok); null when not checked.
          type: dict
        nodes:
          description: Each GPU node checked, as C(slots), with C(cause) when short.
          type: list
          elements: dict
        stages:
          description: Stage name to its status.
          type: dict
gpunode:
  description: The run in brief, as M(gpunode.gpunode.gpunode) returns it.
  returned: always
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpunode.gpunode.plugins.module_utils.gpunode_events import (
    facts,
    failure_message,
    summary,
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


def main():
    argument_spec = dict(COMMON_ARGS)
    argument_spec.update(
        scope=dict(type='str', choices=['node', 'cluster', 'both']),
        kubeconfig=dict(type='path'),
        variant=dict(type='str', choices=list(VARIANTS)),
        replicas=dict(type='int'),
        rename_shared=dict(type='bool', default=False),
        only=dict(type='list', elements='str', default=[]),
        require_healthy=dict(type='bool', default=False),
    )
    module = AnsibleModule(argument_spec=argument_spec,
                           supports_check_mode=True)
    p = module.params
    argv = [binary_of(module), 'status', '--json'] + root_flags(p) + \
        trust_flags(p) + option_flags(p, (
            ('bundle', '--bundle'), ('scope', '--scope'),
            ('kubeconfig', '--kubeconfig'), ('variant', '--variant'),
            ('replicas', '--replicas'), ('rename_shared', '--rename-shared'),
            ('only', '--only')))
    run = run_gpunode(module, argv)
    brief = summary(run.result, run.events)
    result = dict(changed=False, gpunode=brief, cmd=run.argv,
                  ansible_facts=dict(gpunode=facts(run.events, run.result)))
    # status exits 1 when a layer is not in place: a fact, not an error,
    # unless asked; anything else (bad input, no lock) is an error.
    if run.rc not in (0, 1) or (p['require_healthy'] and run.rc != 0):
        module.fail_json(rc=run.rc, msg=failure_message('status', run.result,
                                             brief['failure']), **result)
    result['msg'] = 'gpunode status: %s' % brief['summary']
    module.exit_json(**result)


if __name__ == '__main__':
    main()
