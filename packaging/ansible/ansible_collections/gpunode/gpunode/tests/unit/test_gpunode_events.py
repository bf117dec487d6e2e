# -*- coding: utf-8 -*-
# module_utils/gpunode_events.py: gpunode's --json events onto Ansible's
# contract. The events are shaped as docs/json-events.md says (schema 1);
# the real binary's events are exercised by test_modules.py and the
# playbook tests (test/ansible/).

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import unittest

from ansible_collections.gpunode.gpunode.plugins.module_utils import gpunode_events as ev


def result(command='install', exit_code=0, status='done', stages=(), **extra):
    r = {'event': 'result', 'schema': 1, 'command': command,
         'exit_code': exit_code, 'status': status, 'summary': 'summary',
         'stages': [{'stage': s, 'status': st} for s, st in stages],
         'scope': 'node', 'role': 'agent', 'kubeconfig': '/k'}
    r.update(extra)
    return r


def stage(name, status, **extra):
    e = {'event': 'stage', 'stage': name, 'layer': name + ' layer',
         'status': status, 'code': '%s.x' % name, 'summary': name + ' now'}
    e.update(extra)
    return e


class ParseTest(unittest.TestCase):
    def test_lines_that_are_not_events_are_left_out(self):
        out = '\n'.join([
            'a wrapper says hello',
            json.dumps(stage('driver', 'satisfied')),
            '{not json',
            '[1, 2]',
            json.dumps({'no': 'event field'}),
            json.dumps(result()),
        ])
        events = ev.parse_events(out)
        self.assertEqual([e['event'] for e in events], ['stage', 'result'])

    def test_no_result_line_is_an_error_naming_the_exit(self):
        with self.assertRaises(ev.EventError) as caught:
            ev.result_event([stage('driver', 'satisfied')], 137)
        self.assertIn('exited 137 (killed)', str(caught.exception))
        with self.assertRaises(ev.EventError) as caught:
            ev.result_event([], 3)
        self.assertIn('exited 3 (timed out)', str(caught.exception))

    def test_another_schema_is_refused(self):
        with self.assertRaises(ev.EventError) as caught:
            ev.result_event([result(schema=2)], 0)
        self.assertIn('schema 2; this collection reads 1', str(caught.exception))
        with self.assertRaises(ev.EventError):
            ev.result_event([{'event': 'result', 'exit_code': 0}], 0)

    def test_the_last_result_counts(self):
        first = result(exit_code=1, status='blocked')
        last = result()
        self.assertIs(ev.result_event([first, last], 0), last)


class ChangedTest(unittest.TestCase):
    def test_a_converged_install_is_not_changed(self):
        events = [stage('driver', 'satisfied'), stage('plugin', 'satisfied')]
        self.assertFalse(ev.wrote_something(events, result()))

    def test_an_applied_stage_is_changed(self):
        events = [stage('labels', 'applied')]
        self.assertTrue(ev.wrote_something(events, result()))

    def test_an_apply_that_then_failed_is_still_changed(self):
        events = [{'event': 'apply', 'stage': 'image', 'action': 'import'},
                  {'event': 'error', 'layer': 'image', 'message': 'ctr failed',
                   'fix': '', 'exit_code': 1}]
        self.assertTrue(ev.wrote_something(
            events, result(exit_code=1, status='blocked')))

    def test_uninstall_is_changed_when_it_removed_something(self):
        removed = result('uninstall', stages=[('image', 'removed')])
        self.assertTrue(ev.wrote_something([], removed))
        self.assertFalse(ev.wrote_something([], result('uninstall')))

    def test_a_plan_would_change_when_a_stage_would_apply(self):
        self.assertTrue(ev.would_write([stage('labels', 'would-apply')]))
        self.assertTrue(ev.would_write([stage('image', 'needed')]))
        self.assertFalse(ev.would_write([stage('image', 'satisfied')]))


class FailureTest(unittest.TestCase):
    def test_done_is_no_failure(self):
        self.assertIsNone(ev.failure([stage('driver', 'satisfied')], result()))

    def test_the_lowest_blocked_stage_is_named_with_its_fix(self):
        events = [stage('driver', 'satisfied'),
                  stage('handler', 'blocked', fix='restart k3s-agent'),
                  stage('plugin', 'blocked', fix='later')]
        what = ev.failure(events, result(exit_code=1, status='blocked'))
        self.assertEqual(what, {'stage': 'handler', 'layer': 'handler layer',
                                'code': 'handler.x', 'message': 'handler now',
                                'fix': 'restart k3s-agent'})
        line = ev.failure_message('install', result(exit_code=1,
                                                    status='blocked'), what)
        self.assertEqual(line, 'gpunode install: blocked at handler (handler '
                         'layer): handler now Fix: restart k3s-agent')

    def test_a_failed_smoke_names_the_layer_of_its_cause(self):
        # The smoke stage's own layer is where it looked; its facts name
        # where the cause is (docs/json-events.md, smoke).
        events = [stage('smoke', 'blocked', layer='Pod resource limit',
                        code='smoke.image',
                        summary='image: the CUDA Pod p is ErrImagePull on '
                        'node gpu-b: ...',
                        fix='on node gpu-b: sudo k3s ctr -n k8s.io images '
                        'import FILE.tar',
                        facts={'layer': 'image', 'node': 'gpu-b'})]
        what = ev.failure(events, result(exit_code=1, status='blocked'))
        self.assertEqual(what['layer'], 'image')
        self.assertEqual(what['stage'], 'smoke')
        # Before a Pod ran the facts' layer is null: the stage's own.
        events[0]['facts'] = {'layer': None}
        self.assertEqual(ev.failure(events, result(
            exit_code=1, status='blocked'))['layer'], 'Pod resource limit')

    def test_an_error_event_comes_before_a_blocked_stage(self):
        events = [stage('plugin', 'blocked'),
                  {'event': 'error', 'layer': 'cluster', 'message': 'refused',
                   'fix': 'check the API server', 'exit_code': 1}]
        what = ev.failure(events, result(exit_code=1, status='blocked'))
        self.assertEqual(what['layer'], 'cluster')
        self.assertEqual(what['fix'], 'check the API server')

    def test_without_either_the_result_summary_is_the_message(self):
        what = ev.failure([], result(exit_code=3, status='timed-out',
                                     summary='allocatable: 1 of 2'))
        self.assertEqual(what['message'], 'allocatable: 1 of 2')
        self.assertIsNone(what['stage'])


class AnsibleTermsTest(unittest.TestCase):
    # gpunode's own fix lines (installer/stages/*.cpp), as an operator of
    # the role reads them: its variables, not gpunode's flags.
    CASES = (
        ('sudo systemctl restart k3s-agent, or rerun gpunode with --restart-k3s',
         'sudo systemctl restart k3s-agent, or rerun the playbook with '
         'gpunode_restart_k3s: true'),
        ('sudo systemctl restart k3s, or gpunode install --restart-k3s',
         'sudo systemctl restart k3s, or rerun the playbook with '
         'gpunode_restart_k3s: true'),
        ('sudo gpunode install --scope cluster --all-nodes --variant '
         'time-slicing --replicas 4',
         'rerun the playbook with gpunode_all_nodes: true, gpunode_variant: '
         'time-slicing, gpunode_replicas: 4'),
        ('rerun with --all-nodes to change every GPU node',
         'rerun the playbook with gpunode_all_nodes: true to change every GPU '
         'node'),
        ('delete it, or rerun gpunode with --replace-existing. To keep',
         'delete it, or rerun the playbook with gpunode_replace_existing: '
         'true. To keep'),
        ('; rerun with --upgrade-toolkit to install the bundle\'s',
         '; rerun the playbook with gpunode_upgrade_toolkit: true to install '
         'the bundle\'s'),
        ('rerun here without --variant/--replicas/--rename-shared to take',
         'rerun here without gpunode_variant/gpunode_replicas/'
         'gpunode_rename_shared to take'),
        ('use the same --rename-shared setting as the cluster\'s workloads',
         'use the same gpunode_rename_shared setting as the cluster\'s '
         'workloads'),
        # The plugin stage's fix (another plugin serves): gpunode_skip, a
        # list.
        ('To keep that one instead: gpunode install --skip plugin, and give '
         'the platform',
         'To keep that one instead: rerun the playbook with gpunode_skip: '
         '[plugin], and give the platform'),
        ('gpunode install (without --skip plugin)',
         'gpunode install (without gpunode_skip: [plugin])'),
        # A bad GPUNODE_TIMEOUT (installer/cli/site_config.cpp).
        ('set GPUNODE_TIMEOUT in gpunode\'s environment to a valid value, or '
         'unset it (--timeout, when given, overrides it)',
         'set GPUNODE_TIMEOUT in gpunode\'s environment to a valid value, or '
         'unset it (gpunode_timeout, when given, overrides it)'),
        # Text without a flag the role sets stays as it is.
        ('gpunode install --dry-run first', 'gpunode install --dry-run first'),
        ('sudo systemctl restart k3s-agent', 'sudo systemctl restart k3s-agent'),
    )

    def test_flags_become_the_role_variables(self):
        for text, want in self.CASES:
            self.assertEqual(ev.ansible_terms(text), want)

    def test_a_refused_value_names_its_variable_not_the_help(self):
        # Regression (independent try of issue 26): a bad gpunode_timeout
        # was told to read `gpunode install --help`.
        events = [{'event': 'error', 'layer': 'usage', 'exit_code': 2,
                   'message': "--timeout: 'zz' is not a duration such as 10m",
                   'fix': "gpunode install --help gives each flag's values"}]
        res = result(exit_code=2, status='invalid-input')
        got = ev.failure(events, res)
        self.assertEqual(got['message'],
                         "gpunode_timeout: 'zz' is not a duration such as 10m")
        self.assertEqual(got['fix'],
                         'correct gpunode_timeout (gpunode install --help '
                         'describes its values, as --timeout)')
        # A flag the role has no variable for keeps gpunode's fix.
        events[0]['message'] = "--frobnicate: unknown"
        self.assertEqual(ev.failure(events, res)['fix'],
                         "gpunode install --help gives each flag's values")
        # So does a fix of its own (the bundle and archive conflict).
        events[0]['message'] = ('--image-archive: not with --bundle (the '
                                'bundle brings the image)')
        events[0]['fix'] = ("drop --image-archive: the bundle's images/ "
                            "holds the device plugin's archive")
        self.assertEqual(ev.failure(events, res)['fix'],
                         "drop gpunode_image_archive: the bundle's images/ "
                         "holds the device plugin's archive")

    def test_the_failure_and_the_stages_speak_ansible(self):
        events = [stage('handler', 'blocked',
                        fix='sudo systemctl restart k3s-agent, or rerun '
                        'gpunode with --restart-k3s')]
        res = result(exit_code=1, status='blocked',
                     stages=[('handler', 'blocked')])
        want = ('sudo systemctl restart k3s-agent, or rerun the playbook '
                'with gpunode_restart_k3s: true')
        self.assertEqual(ev.failure(events, res)['fix'], want)
        self.assertEqual(ev.summary(res, events)['stages'][0]['fix'], want)

    def test_every_variable_named_is_one_the_role_has(self):
        defaults = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', 'roles', 'gpunode', 'defaults',
                                'main.yml')
        with open(defaults) as f:
            text = f.read()
        for name in ev.FLAG_VARIABLES.values():
            self.assertIn('\n%s:' % name, text, name)


class SafeTextTest(unittest.TestCase):
    def test_control_characters_are_escaped(self):
        self.assertEqual(ev.safe_text('a\x1b[2Jb\nc\x7f\x9b'),
                         'a\\x1b[2Jb\\x0ac\\x7f\\x9b')
        self.assertEqual(ev.safe_text('NVIDIA H200 \u00e9'), 'NVIDIA H200 \u00e9')
        self.assertEqual(ev.safe_text(None), '')

    def test_untrusted_text_is_escaped_in_the_failure(self):
        events = [stage('driver', 'blocked', summary='GPU \x1b]0;pwned\x07')]
        what = ev.failure(events, result(exit_code=1, status='blocked'))
        self.assertNotIn('\x1b', what['message'])
        self.assertIn('\\x1b]0;pwned\\x07', what['message'])


class FactsTest(unittest.TestCase):
    def test_gpus_driver_and_slots(self):
        events = [
            stage('preflight', 'satisfied', facts={'node': 'gpu-a'}),
            stage('driver', 'satisfied', facts={
                'driver_version': '580.159.04', 'gpu_count': 1,
                'gpus': [{'index': 0, 'name': 'NVIDIA H200', 'uuid': 'GPU-1',
                          'memory_mib': 143771, 'mig_mode': 'disabled'}],
                'cuda': {'checked': True, 'outcome': 'ok',
                         'driver_api_version': '13.0'},
                'fabric': {'nvswitch': False},
                'health': [{'gpu': 0, 'kind': 'xid', 'xid': 79,
                            'unhealthy': True,
                            'message': 'GPU 0 had Xid 79\x1b[2J'}]}),
            stage('allocatable', 'satisfied', facts={'nodes': [
                {'node': 'gpu-a', 'this_node': True, 'gpus': 1,
                 'resource': 'nvidia.com/gpu', 'expected': 4,
                 'advertised': 4, 'pods_current': True, 'ok': True},
                {'node': 'gpu-b', 'this_node': False, 'gpus': 2,
                 'resource': 'nvidia.com/gpu', 'expected': 8,
                 'advertised': None, 'pods_current': False, 'ok': False,
                 'cause': {'layer': 'handler', 'message': 'no runtime',
                           'fix': 'on node gpu-b: restart'}}]}),
            stage('plugin', 'satisfied', facts={'cluster_plugin': {
                'variant': 'time-slicing', 'replicas': 4,
                'resource': 'nvidia.com/gpu'}}),
        ]
        f = ev.facts(events, result(stages=[('driver', 'satisfied')]))
        self.assertEqual(f['node'], 'gpu-a')
        self.assertEqual(f['driver_version'], '580.159.04')
        self.assertEqual(f['gpus'][0]['name'], 'NVIDIA H200')
        self.assertEqual(f['cuda'], {'checked': True, 'outcome': 'ok',
                                     'version': '13.0'})
        self.assertFalse(f['nvswitch'])
        self.assertEqual(f['health'][0]['kind'], 'xid')
        self.assertTrue(f['health'][0]['unhealthy'])
        self.assertNotIn('\x1b', f['health'][0]['message'])
        self.assertEqual(f['slots']['advertised'], 4)
        self.assertTrue(f['slots']['ok'])
        self.assertEqual(f['plugin'], {'variant': 'time-slicing',
                                       'replicas': 4,
                                       'resource': 'nvidia.com/gpu'})
        self.assertEqual(f['nodes'][1]['cause']['layer'], 'handler')
        self.assertTrue(f['healthy'])
        self.assertEqual(f['stages'], {'driver': 'satisfied'})

    def test_a_blocked_run_has_empty_facts_not_missing_ones(self):
        f = ev.facts([stage('driver', 'blocked')],
                     result(exit_code=1, status='blocked'))
        self.assertFalse(f['healthy'])
        self.assertIsNone(f['slots'])
        self.assertEqual(f['gpus'], [])
        self.assertIsNone(f['driver_version'])


class DiffTest(unittest.TestCase):
    def test_each_stage_that_would_change_with_each_nodes_slots(self):
        events = [
            stage('driver', 'satisfied'),
            stage('plugin', 'would-apply', action='update DaemonSet',
                  facts={'objects': {'update': ['DaemonSet kube-system/x']},
                         'nodes': [{'node': 'gpu-b',
                                    'now': {'resource': 'nvidia.com/gpu',
                                            'count': 2},
                                    'after': {'resource': 'nvidia.com/gpu',
                                              'count': 8}}]}),
            stage('labels', 'would-apply', action='label',
                  facts={'labels': [
                      {'name': 'nvidia.com/gpu.present', 'value': 'true',
                       'set': True},
                      {'name': 'nvidia.com/gpu.count', 'value': '2',
                       'set': False}]}),
        ]
        diffs = ev.plan_diff(events)
        self.assertEqual(len(diffs), 2)
        plugin = [d for d in diffs if d['after_header'].startswith('plugin')][0]
        self.assertEqual(plugin['before'],
                         'plugin now\nnode gpu-b: nvidia.com/gpu 2\n')
        self.assertEqual(plugin['after'],
                         'update DaemonSet\nupdate DaemonSet kube-system/x\n'
                         'node gpu-b: nvidia.com/gpu 8\n')
        labels = [d for d in diffs if d['after_header'].startswith('labels')][0]
        self.assertIn('nvidia.com/gpu.count=2', labels['after'])
        self.assertNotIn('nvidia.com/gpu.count=2', labels['before'])

    def test_nothing_to_change_is_no_diff(self):
        self.assertEqual(ev.plan_diff([stage('driver', 'satisfied')]), [])


if __name__ == '__main__':
    unittest.main()
