# -*- coding: utf-8 -*-
# plugins/filter/fleet_summary.py: each node's outcome from what the
# rollout's plays registered, including hosts that failed, became
# unreachable, or were never reached.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import unittest

from ansible_collections.gpunode.gpunode.plugins.filter.fleet_summary import fleet_summary

GROUPS = {'gpunode_servers': ['server'],
          'gpunode_gpu_nodes': ['gpu-a', 'gpu-b', 'gpu-c', 'gpu-d', 'gpu-e']}


def node_result(changed=False, failed=False, **extra):
    r = {'changed': changed, 'failed': failed}
    r.update(extra)
    return r


def by_node(rows):
    return dict((r['node'], r) for r in rows)


class FleetSummaryTest(unittest.TestCase):
    def hostvars(self):
        check_nodes = [
            {'node': 'gpu-a', 'ok': True},
            {'node': 'gpu-e', 'ok': False, 'advertised': 0, 'expected': 2,
             'resource': 'nvidia.com/gpu',
             'cause': {'layer': 'plugin', 'message': 'no pod',
                       'fix': 'on node gpu-e: gpunode install'}},
        ]
        return {
            'server': {
                'gpunode_bundle_check': {'changed': False, 'skipped': True},
                'gpunode_cluster': node_result(changed=True),
                'gpunode_check': {'changed': False, 'ansible_facts': {
                    'gpunode': {'nodes': check_nodes}}},
            },
            'gpu-a': {'gpunode_node': node_result(changed=True),
                      'ansible_facts': {'gpunode': {'node': 'gpu-a'}}},
            'gpu-b': {'gpunode_node': node_result(
                failed=True, msg='gpunode install: blocked at handler',
                gpunode={'failure': {
                    'stage': 'handler', 'layer': 'containerd runtime handler',
                    'message': 'containerd has no runtime nvidia',
                    'fix': 'sudo systemctl restart k3s-agent'}})},
            'gpu-c': {'gpunode_bundle_check': {
                'unreachable': True, 'msg': 'Failed to connect to the host'}},
            'gpu-d': {},
            'gpu-e': {'gpunode_node': node_result(),
                      'ansible_facts': {'gpunode': {'node': 'gpu-e'}}},
        }

    def test_each_outcome_and_why(self):
        rows = fleet_summary(self.hostvars(), GROUPS)
        self.assertEqual([r['node'] for r in rows],
                         ['server', 'gpu-a', 'gpu-b', 'gpu-c', 'gpu-d', 'gpu-e'])
        rows = by_node(rows)
        self.assertEqual(rows['server']['outcome'], 'changed')
        self.assertEqual(rows['server']['part'], 'cluster part')
        self.assertEqual(rows['gpu-a']['outcome'], 'changed')
        self.assertEqual(rows['gpu-b']['outcome'], 'failed')
        self.assertEqual(rows['gpu-b']['stage'], 'handler')
        self.assertEqual(rows['gpu-b']['line'],
                         'gpu-b (node part): failed at handler (containerd '
                         'runtime handler): containerd has no runtime nvidia '
                         'Fix: sudo systemctl restart k3s-agent')
        self.assertEqual(rows['gpu-c']['outcome'], 'unreachable')
        self.assertEqual(rows['gpu-c']['message'],
                         'Failed to connect to the host')
        self.assertEqual(rows['gpu-d']['outcome'], 'not run')

    def test_a_node_short_in_the_fleet_check_is_failed_with_its_cause(self):
        row = by_node(fleet_summary(self.hostvars(), GROUPS))['gpu-e']
        self.assertEqual(row['outcome'], 'failed')
        self.assertEqual(row['stage'], 'allocatable')
        self.assertEqual(row['layer'], 'plugin')
        self.assertEqual(row['fix'], 'on node gpu-e: gpunode install')

    def test_a_converged_rerun_is_ok_everywhere(self):
        hostvars = dict((h, {'gpunode_node': node_result()})
                        for h in GROUPS['gpunode_gpu_nodes'])
        hostvars['server'] = {'gpunode_cluster': node_result()}
        rows = fleet_summary(hostvars, GROUPS)
        self.assertEqual(set(r['outcome'] for r in rows), set(['ok']))

    def test_a_cluster_part_that_never_ran_is_named(self):
        groups = {'gpunode_servers': ['s1', 's2'], 'gpunode_gpu_nodes': []}
        rows = fleet_summary({'s1': {}, 's2': {}}, groups)
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0]['outcome'], 'not run')
        self.assertEqual(rows[0]['part'], 'cluster part')

    def test_a_failed_bundle_check_stops_there(self):
        hostvars = self.hostvars()
        hostvars['gpu-a']['gpunode_bundle_check'] = node_result(
            failed=True, msg='bundle verify failed',
            failure={'stage': 'bundle', 'layer': 'bundle',
                     'message': 'images/x.tar: SHA-256 differs', 'fix': None})
        row = by_node(fleet_summary(hostvars, GROUPS))['gpu-a']
        self.assertEqual(row['outcome'], 'failed')
        self.assertEqual(row['message'], 'images/x.tar: SHA-256 differs')

    def test_unreachable_at_whichever_task_met_it_first(self):
        # The bundle copy's tasks (a stat of the node's bundle.toml, the
        # tar stream) meet an unreachable node before any gpunode module
        # does.
        for name in ('gpunode_bundle_node_toml', 'gpunode_bundle_copy'):
            hostvars = self.hostvars()
            hostvars['gpu-d'] = {name: {
                'unreachable': True, 'changed': False,
                'msg': 'ssh: connect to host gpu-d port 22: Connection refused'}}
            row = by_node(fleet_summary(hostvars, GROUPS))['gpu-d']
            self.assertEqual(row['outcome'], 'unreachable', name)
            self.assertEqual(row['line'], 'gpu-d (node part): unreachable: '
                             'ssh: connect to host gpu-d port 22: Connection '
                             'refused')

    def test_the_controller_verify_failing_names_the_bundle_problem(self):
        hostvars = self.hostvars()
        hostvars['gpu-a'] = {'gpunode_bundle_trusted': {
            'failed': True, 'changed': False,
            'msg': 'gpunode bundle verify: integrity failure at bundle: '
                   'bin/gpunode: SHA-256 differs'}}
        row = by_node(fleet_summary(hostvars, GROUPS))['gpu-a']
        self.assertEqual(row['outcome'], 'failed')
        self.assertEqual(row['message'], 'gpunode bundle verify: integrity '
                         'failure at bundle: bin/gpunode: SHA-256 differs')

    def test_a_failed_smoke_test_has_its_row_with_node_and_fix(self):
        hostvars = self.hostvars()
        hostvars['server']['gpunode_smoke_run'] = node_result(
            failed=True, msg='gpunode install: blocked at smoke',
            gpunode={'failure': {
                'stage': 'smoke', 'layer': 'image',
                'message': 'image: the CUDA Pod gpunode-smoke-1 is '
                           'ErrImagePull on node gpu-a: the image cuda is not '
                           "in k3s's containerd there",
                'fix': 'on node gpu-a: sudo k3s ctr -n k8s.io images import '
                       'FILE.tar'}})
        rows = fleet_summary(hostvars, GROUPS)
        self.assertEqual(rows[-1]['part'], 'smoke test')
        self.assertEqual(rows[-1]['outcome'], 'failed')
        self.assertEqual(
            rows[-1]['line'],
            'server (smoke test): failed at smoke (image): image: the CUDA '
            'Pod gpunode-smoke-1 is ErrImagePull on node gpu-a: the image '
            "cuda is not in k3s's containerd there Fix: on node gpu-a: sudo "
            'k3s ctr -n k8s.io images import FILE.tar')

    def test_no_smoke_row_when_it_did_not_run(self):
        hostvars = self.hostvars()
        hostvars['server']['gpunode_smoke_run'] = {'skipped': True,
                                                   'changed': False}
        rows = fleet_summary(hostvars, GROUPS)
        self.assertNotIn('smoke test', [r['part'] for r in rows])
        hostvars['server']['gpunode_smoke_run'] = node_result()
        self.assertEqual(fleet_summary(hostvars, GROUPS)[-1]['line'],
                         'server (smoke test): ok')

    def test_a_bad_setting_in_the_verify_carries_gpunode_fix(self):
        hostvars = self.hostvars()
        hostvars['gpu-a']['gpunode_bundle_check'] = node_result(
            failed=True, rc=2, msg='gpunode bundle verify: invalid input',
            failure={'stage': 'usage', 'layer': 'usage',
                     'message': "GPUNODE_TIMEOUT: expected a positive "
                                "duration, got 'bogus'",
                     'fix': 'set GPUNODE_TIMEOUT in gpunode\'s environment '
                            'to a valid value, or unset it (gpunode_timeout, '
                            'when given, overrides it)'})
        row = by_node(fleet_summary(hostvars, GROUPS))['gpu-a']
        self.assertEqual(row['outcome'], 'failed')
        self.assertIn("GPUNODE_TIMEOUT: expected a positive duration, got "
                      "'bogus' Fix: set GPUNODE_TIMEOUT", row['line'])


if __name__ == '__main__':
    unittest.main()
