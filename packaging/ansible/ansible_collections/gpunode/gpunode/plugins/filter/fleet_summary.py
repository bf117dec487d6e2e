# -*- coding: utf-8 -*-
# The rollout's summary (roles/gpunode/tasks/summary.yml): for each node,
# ok, changed or failed, and why, from what the earlier plays registered on
# it. A host's registered results stay in hostvars after it failed or became
# unreachable, so the summary sees every host the rollout reached. Python
# standard library only.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: fleet_summary
short_description: Each node's outcome of a gpunode rollout
version_added: 0.1.0
description:
  - Takes C(hostvars) and C(groups) and returns one row a node, the cluster
    part's server first, then each GPU node of C(gpunode_gpu_nodes).
  - A row has C(node), C(part), C(outcome) (C(ok), C(changed), C(failed),
    C(unreachable) or C(not run)), C(stage), C(layer), C(message), C(fix) and
    C(line), the row in words.
  - When C(gpunode_smoke) ran, a last row, C(part) C(smoke test), on the
    server that ran the CUDA Pod; a failed one names the layer, the node the
    Pod was scheduled on and the fix there.
  - A GPU node whose own part succeeded is still C(failed) when the fleet-wide
    check (C(gpunode_check), C(gpunode status --scope cluster) on a server)
    found it short of its slots; the row then names the lowest broken layer.
positional: _input, groups
options:
  _input:
    description: C(hostvars).
    type: dict
    required: true
  groups:
    description: C(groups).
    type: dict
    required: true
'''

EXAMPLES = r'''
- name: Each node's outcome
  ansible.builtin.set_fact:
    gpunode_summary: "{{ hostvars | gpunode.gpunode.fleet_summary(groups) }}"
'''

RETURN = r'''
_value:
  description: One row a node.
  type: list
  elements: dict
'''

_DONE = ('ok', 'changed')

# What the role registers on a host before its main task, in the order the
# tasks run (roles/gpunode/tasks/bundle.yml): whichever first met a host
# unreachable, or failed, decides its row. The callback
# (plugins/callback/rollout_summary.py) records the same names.
BUNDLE_RESULTS = ('gpunode_bundle_trusted', 'gpunode_bundle_node_toml',
                  'gpunode_bundle_copy',
                  'gpunode_bundle_check')
# gpunode_smoke: the CUDA Pod's run (roles/gpunode/tasks/check.yml), on a
# server: its own row, since the Pod may run on any GPU node.
SMOKE_RESULT = 'gpunode_smoke_run'
MAIN_RESULTS = ('gpunode_cluster', 'gpunode_node', 'gpunode_check',
                SMOKE_RESULT)


def _mapping(value):
    # hostvars values are mapping-like (HostVarsVars), not always dicts.
    return value if hasattr(value, 'get') else None


def _outcome(results):
    """The outcome of one host's tasks, in order: the first that did not end
    ok or changed decides; a main task that never ran is `not run`."""
    row = dict(outcome='ok', stage=None, layer=None, message='', fix=None)
    *earlier, main = results
    for res in earlier + [main]:
        res = _mapping(res)
        if res is None or res.get('skipped'):
            continue
        if res.get('unreachable'):
            row.update(outcome='unreachable', message=res.get('msg', ''))
            return row
        if res.get('failed'):
            what = (res.get('gpunode') or {}).get('failure') or \
                res.get('failure') or {}
            row.update(outcome='failed', stage=what.get('stage'),
                       layer=what.get('layer'),
                       message=what.get('message') or res.get('msg', ''),
                       fix=what.get('fix'))
            return row
        if res.get('changed'):
            row['outcome'] = 'changed'
    if _mapping(main) is None:
        row.update(outcome='not run',
                   message='an earlier failure ended the rollout before '
                   'it reached this node')
    return row


def _short_nodes(hostvars, servers):
    """node name -> its entry in the fleet-wide check, for nodes short of
    their slots."""
    for host in servers:
        check = _mapping(hostvars[host].get('gpunode_check'))
        if check is None or check.get('skipped'):
            continue
        nodes = (check.get('ansible_facts') or {}).get('gpunode', {}).get(
            'nodes') or []
        return dict((n.get('node'), n) for n in nodes if not n.get('ok'))
    return {}


def _smoke_row(hostvars, servers):
    """The smoke test's row (gpunode_smoke), on the server that ran it, or
    None when it did not run. gpunode's message names the node the Pod was
    scheduled on, and its fix what to do there."""
    for host in servers:
        res = _mapping(hostvars[host].get(SMOKE_RESULT))
        if res is None or res.get('skipped'):
            continue
        row = _outcome([res])
        row.update(node=host, part='smoke test')
        return row
    return None


def _line(host, part, row):
    text = '%s (%s): %s' % (host, part, row['outcome'])
    if row['stage']:
        text += ' at %s' % row['stage']
    if row['layer'] and row['layer'] != row['stage']:
        text += ' (%s)' % row['layer']
    if row['message']:
        text += ': %s' % row['message']
    if row['fix']:
        text += ' Fix: %s' % row['fix']
    return text


def fleet_summary(hostvars, groups):
    servers = list(groups.get('gpunode_servers', []))
    gpu_nodes = list(groups.get('gpunode_gpu_nodes', []))
    rows = []
    # run_once shares the cluster part's result with every server of its
    # play; the first server that has it stands for the part.
    for host in servers:
        vars_ = hostvars[host]
        if _mapping(vars_.get('gpunode_cluster')) is not None or \
                host == servers[-1]:
            row = _outcome([vars_.get(n) for n in BUNDLE_RESULTS] +
                           [vars_.get('gpunode_cluster')])
            row.update(node=host, part='cluster part')
            rows.append(row)
            break
    short = _short_nodes(hostvars, servers)
    for host in gpu_nodes:
        vars_ = hostvars[host]
        row = _outcome([vars_.get(n) for n in BUNDLE_RESULTS] +
                       [vars_.get('gpunode_node')])
        facts = (vars_.get('ansible_facts') or {}).get('gpunode') or {}
        name = facts.get('node') or host
        if row['outcome'] in _DONE and name in short:
            cause = short[name].get('cause') or {}
            row.update(outcome='failed', stage='allocatable',
                       layer=cause.get('layer'),
                       message=cause.get('message') or
                       'advertises %s of %s %s' % (
                           short[name].get('advertised'),
                           short[name].get('expected'),
                           short[name].get('resource')),
                       fix=cause.get('fix'))
        row.update(node=host, part='node part')
        rows.append(row)
    smoke = _smoke_row(hostvars, servers)
    if smoke is not None:
        rows.append(smoke)
    for row in rows:
        row['line'] = _line(row['node'], row['part'], row)
    return rows


class FilterModule(object):
    def filters(self):
        return {'fleet_summary': fleet_summary}
