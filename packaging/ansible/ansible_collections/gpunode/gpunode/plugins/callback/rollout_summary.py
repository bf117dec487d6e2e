# -*- coding: utf-8 -*-
# The rollout's summary when the playbook ends before its summary play:
# Ansible ends a whole playbook when one batch of a serial play fails
# beyond max_fail_percentage, or fails entirely (PlaybookExecutor.run in
# ansible-core's lib/ansible/executor/playbook_executor.py: break_play), so
# the last play never runs. This callback sees every result as it comes and
# prints the same rows (plugins/filter/fleet_summary.py, one owner) at the
# end, only when the summary play did not.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: rollout_summary
type: aggregate
short_description: The gpunode rollout's summary, even when Ansible ended the playbook early
version_added: 0.1.0
description:
  - Records the results the rollout's tasks register (the bundle's,
    C(gpunode_cluster), C(gpunode_node), C(gpunode_check),
    C(gpunode_smoke_run)) and, when the playbook ends without its summary
    play having run (a failed smoke test ends it too; a batch failed beyond
    C(max_fail_percentage), or all of it), prints each node's outcome and why,
    as the summary play would have.
  - Silent when the summary play ran.
requirements:
  - Enable it in ansible.cfg, C(callbacks_enabled = gpunode.gpunode.rollout_summary),
    or with C(ANSIBLE_CALLBACKS_ENABLED).
'''

from ansible.plugins.callback import CallbackBase

from ansible_collections.gpunode.gpunode.plugins.filter.fleet_summary import (
    BUNDLE_RESULTS,
    MAIN_RESULTS,
    fleet_summary,
)

_REGISTERED = BUNDLE_RESULTS + MAIN_RESULTS


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'gpunode.gpunode.rollout_summary'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._results = {}
        self._groups = {}
        self._summary_ran = False

    def v2_playbook_on_play_start(self, play):
        inventory = play.get_variable_manager()._inventory
        self._groups = inventory.get_groups_dict()

    def _record(self, result, **flags):
        values = dict(result._result)
        values.update(flags)
        facts = values.get('ansible_facts') or {}
        if 'gpunode_summary' in facts:
            self._summary_ran = True
        name = result._task.register
        if name in _REGISTERED:
            host = self._results.setdefault(result._host.get_name(), {})
            host[name] = values
            if 'gpunode' in facts:
                host['ansible_facts'] = facts

    def v2_runner_on_ok(self, result):
        self._record(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, failed=True)

    def v2_runner_on_unreachable(self, result):
        self._record(result, unreachable=True)

    def v2_runner_on_skipped(self, result):
        self._record(result, skipped=True)

    def v2_playbook_on_stats(self, stats):
        if self._summary_ran or not self._results:
            return
        hostvars = dict((h, self._results.get(h, {}))
                        for g in ('gpunode_servers', 'gpunode_gpu_nodes')
                        for h in self._groups.get(g, []))
        self._display.banner('GPUNODE ROLLOUT SUMMARY (the playbook ended '
                             'before its summary play)')
        for row in fleet_summary(hostvars, self._groups):
            self._display.display(row['line'])
