# -*- coding: utf-8 -*-
# The modules run as Ansible runs them (the module file, its arguments in a
# JSON file) against the real gpunode binary and a simulated host tree:
# bad input gets gpunode's exact error class and leaves the host as it was;
# gpunode output the collection cannot trust is refused. Needs
# GPUNODE_BINARY (build/gpunode), GPUNODE_SIM (test/sim) and
# GPUNODE_MAKE_TEST_IMAGE (build/test/make_test_image); the runner
# (test/collection/run-unit.sh) skips, exit 77, without them.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
COLLECTION = os.path.abspath(os.path.join(HERE, '..', '..'))
COLLECTIONS_ROOT = os.path.abspath(os.path.join(COLLECTION, '..', '..', '..'))
GPUNODE = os.environ.get('GPUNODE_BINARY', '')
SIM = os.environ.get('GPUNODE_SIM', '')
MAKE_TEST_IMAGE = os.environ.get('GPUNODE_MAKE_TEST_IMAGE', '')


def run_module(name, args, env=None, check_mode=False):
    """(exit code, result) of plugins/modules/NAME.py with ARGS."""
    with tempfile.NamedTemporaryFile('w', suffix='.json', delete=False) as f:
        payload = dict(args)
        payload['_ansible_check_mode'] = check_mode
        json.dump({'ANSIBLE_MODULE_ARGS': payload}, f)
    try:
        full_env = dict(os.environ)
        full_env['PYTHONPATH'] = COLLECTIONS_ROOT
        full_env.update(env or {})
        p = subprocess.run(
            ['/usr/bin/python3',
             os.path.join(COLLECTION, 'plugins', 'modules', name + '.py'),
             f.name],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env,
            timeout=120, check=False)
    finally:
        os.unlink(f.name)
    return p.returncode, json.loads(p.stdout.decode('utf-8'))


def snapshot(root):
    """Every path under ROOT with its type, mode, size and content hash."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            digest = None
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, 'rb') as fh:
                    digest = hashlib.sha256(fh.read()).hexdigest()
            out[os.path.relpath(path, root)] = (st.st_mode, st.st_size, digest)
    return out


def stand_in(directory, body):
    """A stand-in for gpunode that prints BODY's lines (a Python script)."""
    path = os.path.join(directory, 'gpunode')
    with open(path, 'w') as f:
        f.write('#!/usr/bin/python3\nimport os, signal, sys\n' + body)
    os.chmod(path, 0o755)
    return path


class HostTreeCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix='gpunode-collection-')
        self.root = os.path.join(self.tmp, 'root')
        subprocess.run([os.path.join(SIM, 'host-tree.sh'), self.root, 'agent',
                        'gpu-a'], check=True, stdout=subprocess.DEVNULL)
        self.env = {
            'PATH': os.path.join(SIM, 'bin') + ':' + os.environ['PATH'],
            'GPUNODE_SIM_GPU_COUNT': '2',
            'GPUNODE_SIM_ROOT': self.root,
        }

    def tearDown(self):
        shutil.rmtree(self.tmp)


class BadInputTest(HostTreeCase):
    def test_gpunode_refusing_a_flag_is_failed_with_its_class(self):
        before = snapshot(self.root)
        rc, r = run_module('gpunode', {
            'binary': GPUNODE, 'root': self.root, 'variant': 'default',
            'replicas': 3}, self.env)
        self.assertEqual(rc, 1)
        self.assertTrue(r['failed'])
        self.assertFalse(r['changed'])
        self.assertEqual(r['gpunode']['exit_code'], 2)
        self.assertEqual(r['gpunode']['status'], 'invalid-input')
        # Under Ansible the flag is named as the role's variable.
        self.assertIn('gpunode_replicas', r['msg'])
        self.assertEqual(snapshot(self.root), before)

    def test_a_bad_module_argument_never_runs_gpunode(self):
        before = snapshot(self.root)
        rc, r = run_module('gpunode', {'binary': GPUNODE, 'root': self.root,
                                       'state': 'gone'}, self.env)
        self.assertEqual(rc, 1)
        self.assertIn('value of state must be one of: present, absent',
                      r['msg'])
        self.assertNotIn('gpunode', r)
        self.assertEqual(snapshot(self.root), before)

    def test_a_missing_binary_is_named(self):
        rc, r = run_module('gpunode', {'binary': self.tmp + '/no/gpunode'})
        self.assertEqual(rc, 1)
        self.assertIn('gpunode binary %s/no/gpunode does not exist' % self.tmp,
                      r['msg'])

    def test_uninstall_in_check_mode_is_skipped_not_guessed(self):
        before = snapshot(self.root)
        rc, r = run_module('gpunode', {'binary': GPUNODE, 'root': self.root,
                                       'state': 'absent'}, self.env,
                           check_mode=True)
        self.assertEqual(rc, 0)
        self.assertTrue(r['skipped'])
        self.assertEqual(snapshot(self.root), before)


class RegressionTest(HostTreeCase):
    """Found by the independent try of issue 26."""

    def test_a_binary_others_can_write_is_not_run(self):
        marker = os.path.join(self.tmp, 'ran')
        binary = stand_in(self.tmp, 'open(%r, "w").close()\n' % marker)
        os.chmod(binary, 0o777)
        before = snapshot(self.root)
        for module in ('gpunode', 'gpunode_facts'):
            rc, r = run_module(module, {'binary': binary, 'root': self.root})
            self.assertEqual(rc, 1)
            self.assertEqual(r['failure']['code'], 'bundle.binary-untrusted')
            self.assertIn('%s is writable by everyone' % binary, r['msg'])
            self.assertIn('gpunode_binary', r['failure']['fix'])
            self.assertFalse(os.path.exists(marker))
        self.assertEqual(snapshot(self.root), before)

    def test_a_directory_as_binary_is_named_not_errno(self):
        rc, r = run_module('gpunode', {'binary': self.tmp, 'root': self.root})
        self.assertEqual(rc, 1)
        self.assertEqual(r['msg'],
                         'gpunode binary %s is not a regular file' % self.tmp)
        self.assertEqual(r['failure']['code'], 'bundle.binary-untrusted')

    def test_uninstall_passes_the_scope(self):
        binary = stand_in(self.tmp, 'import json\nprint(json.dumps({"event": '
                          '"result", "schema": 1, "command": "uninstall", '
                          '"exit_code": 0, "status": "done", "summary": '
                          '" ".join(sys.argv[1:]), "stages": []}))\n')
        rc, r = run_module('gpunode', {'binary': binary, 'root': self.root,
                                       'state': 'absent', 'scope': 'node'})
        self.assertEqual(rc, 0)
        self.assertEqual(r['cmd'][1:3], ['uninstall', '--json'])
        self.assertIn('--scope', r['cmd'])
        self.assertEqual(r['cmd'][r['cmd'].index('--scope') + 1], 'node')


class UntrustedOutputTest(HostTreeCase):
    def test_another_schema_is_refused(self):
        binary = stand_in(self.tmp, 'print(\'{"event": "result", "schema": 2, '
                          '"exit_code": 0, "status": "done"}\')\n')
        rc, r = run_module('gpunode', {'binary': binary})
        self.assertEqual(rc, 1)
        self.assertIn('gpunode speaks JSON event schema 2; this collection '
                      'reads 1', r['msg'])
        self.assertNotIn('gpunode', r)

    def test_a_killed_gpunode_without_result_is_failed(self):
        binary = stand_in(self.tmp, 'print(\'{"event": "apply", "stage": '
                          '"image", "action": "import"}\', flush=True)\n'
                          'os.kill(os.getpid(), signal.SIGKILL)\n')
        rc, r = run_module('gpunode', {'binary': binary})
        self.assertEqual(rc, 1)
        self.assertIn('gpunode exited -9 (killed) without its JSON result line',
                      r['msg'])

    def test_control_characters_from_gpunode_are_escaped(self):
        binary = stand_in(self.tmp, (
            'import json\n'
            'print(json.dumps({"event": "stage", "stage": "driver", '
            '"layer": "NVIDIA driver", "status": "blocked", "code": "d.x", '
            '"summary": "GPU \\x1b]0;owned\\x07 lost", "fix": "reboot"}))\n'
            'print(json.dumps({"event": "result", "schema": 1, '
            '"command": "install", "exit_code": 1, "status": "blocked", '
            '"summary": "driver: \\x1b[2J", "stages": [{"stage": "driver", '
            '"status": "blocked"}]}))\n'
            'sys.stderr.write("[ERROR driver] \\x1b[31m\\n")\n'
            'sys.exit(1)\n'))
        rc, r = run_module('gpunode', {'binary': binary})
        self.assertEqual(rc, 1)
        text = json.dumps(r)
        self.assertNotIn('\\u001b', text)
        self.assertIn('GPU \\\\x1b]0;owned\\\\x07 lost', text)
        self.assertEqual(r['msg'], 'gpunode install: blocked at driver (NVIDIA '
                         'driver): GPU \\x1b]0;owned\\x07 lost Fix: reboot')
        self.assertIn('\\x1b[31m', r['stderr_tail'])

    def test_stderr_tail_names_the_role_variables(self):
        binary = stand_in(self.tmp, (
            'import json\n'
            'print(json.dumps({"event": "stage", "stage": "handler", '
            '"layer": "h", "status": "blocked", "code": "h.x", '
            '"summary": "no runtime", "fix": "rerun gpunode with '
            '--restart-k3s"}))\n'
            'print(json.dumps({"event": "result", "schema": 1, '
            '"command": "install", "exit_code": 1, "status": "blocked", '
            '"summary": "h", "stages": [{"stage": "handler", '
            '"status": "blocked"}]}))\n'
            'sys.stderr.write("  fix: rerun gpunode with --restart-k3s\\n")\n'
            'sys.exit(1)\n'))
        rc, r = run_module('gpunode', {'binary': binary})
        self.assertEqual(rc, 1)
        self.assertEqual(r['stderr_tail'], '  fix: rerun the playbook with '
                         'gpunode_restart_k3s: true\\x0a')


class FactsTest(HostTreeCase):
    def test_the_driver_and_gpus_of_the_host(self):
        rc, r = run_module('gpunode_facts', {
            'binary': GPUNODE, 'root': self.root, 'only': ['driver']},
            self.env)
        self.assertEqual(rc, 0, r.get('msg'))
        self.assertFalse(r['changed'])
        facts = r['ansible_facts']['gpunode']
        self.assertTrue(facts['healthy'])
        self.assertEqual(facts['gpu_count'], 2)
        self.assertEqual(facts['driver_version'], '580.159.04')
        self.assertEqual([g['name'] for g in facts['gpus']],
                         ['NVIDIA H200', 'NVIDIA H200'])

    def test_a_layer_not_in_place_is_a_fact_unless_required(self):
        subprocess.run(['rm', '-rf', os.path.join(self.root, 'proc', 'driver')],
                       check=True)
        args = {'binary': GPUNODE, 'root': self.root, 'only': ['driver']}
        env = dict(self.env, GPUNODE_SIM_GPU_COUNT='0')
        rc, r = run_module('gpunode_facts', args, env)
        self.assertEqual(rc, 0, r.get('msg'))
        self.assertFalse(r['ansible_facts']['gpunode']['healthy'])
        self.assertEqual(r['ansible_facts']['gpunode']['stages']['driver'],
                         'blocked')
        rc, r = run_module('gpunode_facts', dict(args, require_healthy=True),
                           env)
        self.assertEqual(rc, 1)
        self.assertTrue(r['msg'].startswith('gpunode status: blocked at driver'),
                        r['msg'])


class TimeoutTest(HostTreeCase):
    def test_no_timeout_flag_unless_the_play_sets_one(self):
        # gpunode's own setting (GPUNODE_TIMEOUT, config.toml) holds then.
        binary = stand_in(self.tmp, (
            'import json\n'
            'print(json.dumps({"event": "result", "schema": 1, "command": '
            '"install", "exit_code": 0, "status": "done", "summary": "done", '
            '"stages": []}))\n'))
        rc, r = run_module('gpunode', {'binary': binary}, self.env)
        self.assertEqual(rc, 0, r.get('msg'))
        self.assertNotIn('--timeout', r['cmd'])
        rc, r = run_module('gpunode', {'binary': binary, 'timeout': '90s'},
                           self.env)
        self.assertEqual(r['cmd'][-2:], ['--timeout', '90s'])


# A gpunode that plans like a node whose cluster part is still to come: the
# plan stops at STAGE unless --skip leaves it out; then the labels would
# change.
WAITS_ON_CLUSTER_PART = '''import json
argv = sys.argv[1:]
skip = argv[argv.index('--skip') + 1].split(',') if '--skip' in argv else []
def out(e):
    print(json.dumps(e))
if 'allocatable' in skip:
    out({'event': 'stage', 'stage': 'labels', 'layer': 'labels',
         'status': 'would-apply', 'code': 'labels.needed', 'summary': 'x'})
    out({'event': 'result', 'schema': 1, 'command': 'plan', 'exit_code': 0,
         'status': 'done', 'summary': 'would label',
         'stages': [{'stage': 'labels', 'status': 'would-apply'}]})
    sys.exit(0)
out({'event': 'stage', 'stage': 'allocatable', 'layer': 'device plugin',
     'status': 'blocked', 'code': 'allocatable.blocked',
     'summary': 'no device plugin pod runs on this node yet',
     'fix': 'on a server: sudo gpunode install --scope cluster'})
out({'event': 'result', 'schema': 1, 'command': 'plan', 'exit_code': 1,
     'status': 'blocked', 'summary': 'blocked',
     'stages': [{'stage': 'allocatable', 'status': 'blocked'}]})
sys.exit(1)
'''


class CheckModeTest(HostTreeCase):
    def test_stages_after_a_planned_cluster_part_are_would_not_failed(self):
        binary = stand_in(self.tmp, WAITS_ON_CLUSTER_PART)
        rc, r = run_module('gpunode', {'binary': binary, 'scope': 'node',
                                       'cluster_part_pending': True},
                           self.env, check_mode=True)
        self.assertEqual(rc, 0, r.get('msg'))
        self.assertTrue(r['changed'])
        self.assertFalse(r.get('failed'))
        self.assertIn('runtimeclass,plugin,allocatable',
                      r['cmd'][r['cmd'].index('--skip') + 1])
        self.assertTrue(any('would: runtimeclass, plugin, allocatable' in w
                            for w in r.get('warnings', [])), r)

    def test_without_a_pending_cluster_part_the_block_is_real(self):
        binary = stand_in(self.tmp, WAITS_ON_CLUSTER_PART)
        rc, r = run_module('gpunode', {'binary': binary, 'scope': 'node'},
                           self.env, check_mode=True)
        self.assertEqual(rc, 1)
        self.assertEqual(r['gpunode']['failure']['code'], 'allocatable.blocked')

    def test_a_bundle_still_to_copy_plans_after_the_copy(self):
        env = dict(self.env, PATH=NO_GPUNODE_PATH)
        rc, r = run_module('gpunode', {'bundle_pending': True, 'scope': 'node'},
                           env, check_mode=True)
        self.assertEqual(rc, 0, r.get('msg'))
        self.assertTrue(r['changed'])
        self.assertIn('would copy the bundle to this node, then plan',
                      r['msg'])
        # Out of check mode the same is no gpunode at all.
        rc, r = run_module('gpunode', {'bundle_pending': True}, env)
        self.assertEqual(rc, 1)
        # The role's variables, not the module's options or its internals.
        self.assertEqual(r['msg'], 'no gpunode to run on this node: install '
                         'the gpunode .deb, set gpunode_binary, or let the '
                         'controller verify the bundle: gpunode_bundle_src')


# A PATH without any gpunode: the node has none of its own.
NO_GPUNODE_PATH = '/usr/bin:/bin'


def sha256_of(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


class TrustTest(unittest.TestCase):
    """A stick whose bin/gpunode was swapped for a script: the script must
    never run, on a node with a gpunode of its own and on one without."""

    @classmethod
    def setUpClass(cls):
        for d in NO_GPUNODE_PATH.split(':') + ['/sbin', '/usr/sbin',
                                               '/usr/local/sbin']:
            if os.path.exists(os.path.join(d, 'gpunode')):
                raise unittest.SkipTest('%s/gpunode is installed here' % d)
        cls.tmp = tempfile.mkdtemp(prefix='gpunode-collection-')
        cls.key = os.path.join(cls.tmp, 'site')
        quiet = dict(check=True, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
        subprocess.run([GPUNODE, 'bundle', 'keygen', '--out', cls.key], **quiet)
        archive = os.path.join(cls.tmp, 'image.tar')
        subprocess.run([MAKE_TEST_IMAGE, archive], **quiet)
        cls.good = os.path.join(cls.tmp, 'good')
        subprocess.run([GPUNODE, 'bundle', 'create', '--out', cls.good,
                        '--image-archive', archive,
                        '--sign-key', cls.key + '.key'], **quiet)
        # The controller verifies the good bundle with its own gpunode.
        rc, r = run_module('gpunode_bundle', {
            'binary': GPUNODE, 'bundle': cls.good,
            'trust_keys': [cls.key + '.pub']})
        assert rc == 0, r
        cls.verified = r['bundle']['toml_sha256']
        # The swapped stick: the same signed bundle.toml, bin/gpunode a script.
        cls.swapped = os.path.join(cls.tmp, 'swapped')
        shutil.copytree(cls.good, cls.swapped)
        cls.marker = os.path.join(cls.tmp, 'the-stick-binary-ran')
        script = os.path.join(cls.swapped, 'bin', 'gpunode')
        os.unlink(script)
        with open(script, 'w') as f:
            f.write('#!/bin/sh\ntouch %s\n' % cls.marker)
        os.chmod(script, 0o755)
        # A node with a gpunode of its own (the .deb's, on PATH).
        cls.installed = os.path.join(cls.tmp, 'usr-bin')
        os.mkdir(cls.installed)
        os.symlink(GPUNODE, os.path.join(cls.installed, 'gpunode'))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def setUp(self):
        self.assertFalse(os.path.exists(self.marker))

    def tearDown(self):
        self.assertFalse(os.path.exists(self.marker),
                         "the stick's own bin/gpunode ran")

    def args(self, bundle, **extra):
        a = {'bundle': bundle, 'trust_keys': [self.key + '.pub']}
        a.update(extra)
        return a

    def test_the_controller_verify_gives_the_bundle_toml_digest(self):
        self.assertEqual(self.verified,
                         sha256_of(os.path.join(self.good, 'bundle.toml')))

    def test_without_a_trusted_verify_the_stick_binary_is_refused(self):
        before = snapshot(self.swapped)
        for module in ('gpunode_bundle', 'gpunode_facts', 'gpunode'):
            rc, r = run_module(module, self.args(self.swapped),
                               {'PATH': NO_GPUNODE_PATH})
            self.assertEqual(rc, 1, module)
            self.assertEqual(r['failure']['code'], 'bundle.binary-unverified')
            self.assertIn('refusing to run %s/bin/gpunode' % self.swapped,
                          r['msg'])
            # The fix names the role's variables, not bundle_sha256.
            self.assertEqual(r['failure']['fix'], 'install the gpunode .deb '
                             'from media you trust (or set gpunode_binary), '
                             'or let the controller verify the bundle: '
                             'gpunode_bundle_src')
            self.assertNotIn('bundle_sha256', r['msg'])
            self.assertNotIn('`binary`', r['msg'])
        self.assertEqual(snapshot(self.swapped), before)

    def test_a_swapped_binary_is_refused_before_it_runs(self):
        before = snapshot(self.swapped)
        for module in ('gpunode_bundle', 'gpunode_facts', 'gpunode'):
            rc, r = run_module(module, self.args(
                self.swapped, bundle_sha256=self.verified),
                {'PATH': NO_GPUNODE_PATH})
            self.assertEqual(rc, 1, module)
            self.assertEqual(r['failure']['code'], 'bundle.binary-mismatch')
            self.assertIn('is not the %s the verified bundle.toml records'
                          % sha256_of(os.path.join(self.good, 'bin',
                                                   'gpunode')), r['msg'])
        self.assertEqual(snapshot(self.swapped), before)

    def test_another_bundle_toml_than_the_verified_one_is_refused(self):
        rc, r = run_module('gpunode_bundle', self.args(
            self.swapped, bundle_sha256='0' * 64), {'PATH': NO_GPUNODE_PATH})
        self.assertEqual(rc, 1)
        self.assertEqual(r['failure']['code'], 'bundle.toml-mismatch')

    def test_an_installed_gpunode_verifies_and_refuses_the_stick(self):
        # The installed gpunode runs, never the stick's: exit 4, naming the
        # swapped file.
        before = snapshot(self.swapped)
        rc, r = run_module('gpunode_bundle', self.args(self.swapped),
                           {'PATH': self.installed + ':' + NO_GPUNODE_PATH})
        self.assertEqual(rc, 1)
        self.assertEqual(r['rc'], 4)
        self.assertIn('bin/gpunode', r['msg'])
        self.assertEqual(snapshot(self.swapped), before)

    def test_an_installed_gpunode_runs_in_place_of_the_stick(self):
        rc, r = run_module('gpunode_bundle', self.args(self.good),
                           {'PATH': self.installed + ':' + NO_GPUNODE_PATH})
        self.assertEqual(rc, 0, r.get('msg'))
        self.assertEqual(r['cmd'][0], os.path.join(self.installed, 'gpunode'))

    def test_the_verified_stick_binary_runs_as_a_private_copy(self):
        rc, r = run_module('gpunode_bundle', self.args(
            self.good, bundle_sha256=self.verified), {'PATH': NO_GPUNODE_PATH})
        self.assertEqual(rc, 0, r.get('msg'))
        self.assertTrue(r['bundle']['signed'])
        copy = r['cmd'][0]
        self.assertNotEqual(copy, os.path.join(self.good, 'bin', 'gpunode'))
        self.assertEqual(os.path.basename(copy), 'gpunode')
        # The private directory went with the module's temp dir.
        self.assertFalse(os.path.exists(copy))


class BundleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix='gpunode-collection-')
        cls.key = os.path.join(cls.tmp, 'site')
        quiet = dict(check=True, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
        subprocess.run([GPUNODE, 'bundle', 'keygen', '--out', cls.key], **quiet)
        archive = os.path.join(cls.tmp, 'image.tar')
        subprocess.run([MAKE_TEST_IMAGE, archive], **quiet)
        cls.bundle = os.path.join(cls.tmp, 'bundle')
        subprocess.run([GPUNODE, 'bundle', 'create', '--out', cls.bundle,
                        '--image-archive', archive,
                        '--sign-key', cls.key + '.key'], **quiet)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_a_signed_bundle_verifies(self):
        rc, r = run_module('gpunode_bundle', {
            'binary': GPUNODE, 'bundle': self.bundle,
            'trust_keys': [self.key + '.pub']})
        self.assertEqual(rc, 0, r.get('msg'))
        self.assertFalse(r['changed'])
        self.assertTrue(r['bundle']['signed'])
        self.assertGreater(r['bundle']['files'], 3)

    def test_a_tampered_file_fails_with_its_name_and_the_bundle_is_untouched(self):
        script = os.path.join(self.bundle, 'install.sh')
        with open(script, 'rb') as f:
            original = f.read()
        with open(script, 'ab') as f:
            f.write(b'# tampered\n')
        try:
            before = snapshot(self.bundle)
            rc, r = run_module('gpunode_bundle', {
                'binary': GPUNODE, 'bundle': self.bundle,
                'trust_keys': [self.key + '.pub']})
            self.assertEqual(snapshot(self.bundle), before)
        finally:
            with open(script, 'wb') as f:
                f.write(original)
        self.assertEqual(rc, 1)
        self.assertEqual(r['rc'], 4)
        self.assertIn('install.sh', r['msg'])

    def test_an_untrusted_signer_fails(self):
        other = os.path.join(self.tmp, 'other')
        subprocess.run([GPUNODE, 'bundle', 'keygen', '--out', other],
                       check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        rc, r = run_module('gpunode_bundle', {
            'binary': GPUNODE, 'bundle': self.bundle,
            'trust_keys': [other + '.pub']})
        self.assertEqual(rc, 1)
        self.assertEqual(r['rc'], 4)


if __name__ == '__main__':
    unittest.main()
