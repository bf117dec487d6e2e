# -*- coding: utf-8 -*-
# plugins/action/gpunode_bundle_copy.py: the node's side of the stream run
# by the real /bin/sh and tar (a whole stream replaces the bundle, a cut or
# empty one leaves the old bundle as it was and nothing half-made), the ssh
# command it streams over, the way it picks, and its refusals.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import os
import shutil
import subprocess
import tempfile
import unittest

# Loaded from its file, not as ansible_collections.*: importing
# ansible.plugins.action installs Ansible's collection finder, which would
# then refuse the other tests' plain imports of this collection.
HERE = os.path.dirname(os.path.abspath(__file__))
_SPEC = importlib.util.spec_from_file_location(
    'gpunode_bundle_copy_action',
    os.path.join(HERE, '..', '..', 'plugins', 'action', 'gpunode_bundle_copy.py'))
copy = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(copy)

SHA = 'a' * 64


def tree(root):
    """{relative path: bytes} of every file under ROOT."""
    found = {}
    for base, _, files in os.walk(root):
        for name in files:
            path = os.path.join(base, name)
            with open(path, 'rb') as f:
                found[os.path.relpath(path, root)] = f.read()
    return found


def local_node(dest, tar_file=None):
    return ['/bin/sh', '-c', copy.node_command(dest, tar_file)]


class NodeSideTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.src = os.path.join(self.dir, 'src')
        os.makedirs(os.path.join(self.src, 'bin'))
        self.write(self.src, 'bundle.toml', b'schema = 1\n')
        self.write(self.src, 'bin/gpunode', b'#!new\n', 0o755)
        self.dest = os.path.join(self.dir, 'node', 'var', 'bundle')

    def tearDown(self):
        shutil.rmtree(self.dir)

    @staticmethod
    def write(root, rel, data, mode=0o644):
        path = os.path.join(root, rel)
        with open(path, 'wb') as f:
            f.write(data)
        os.chmod(path, mode)

    def old_bundle(self):
        os.makedirs(os.path.join(self.dest, 'bin'))
        self.write(self.dest, 'bundle.toml', b'schema = 0\n')
        self.write(self.dest, 'bin/gpunode', b'#!old\n', 0o755)
        self.write(self.dest, 'stale.tar', b'from an older bundle')
        return tree(self.dest)

    def leftovers(self):
        parent = os.path.dirname(self.dest)
        return sorted(n for n in os.listdir(parent) if n != 'bundle')

    def test_a_whole_stream_replaces_the_bundle_whole(self):
        self.old_bundle()
        tar_rc, node_rc, tar_err, out = copy.stream(copy.tar_command(self.src),
                                                    local_node(self.dest))
        self.assertEqual((tar_rc, node_rc), (0, 0), out)
        self.assertEqual(tree(self.dest), tree(self.src))
        self.assertTrue(os.access(os.path.join(self.dest, 'bin/gpunode'), os.X_OK))
        self.assertEqual(self.leftovers(), [])
        self.assertGreater(copy.streamed_bytes(tar_err), 0)

    def test_the_parent_is_made_on_a_fresh_node(self):
        tar_rc, node_rc, _, out = copy.stream(copy.tar_command(self.src),
                                              local_node(self.dest))
        self.assertEqual((tar_rc, node_rc), (0, 0), out)
        self.assertEqual(tree(self.dest), tree(self.src))

    def test_a_cut_stream_leaves_the_old_bundle_and_nothing_half_made(self):
        before = self.old_bundle()
        whole = subprocess.run(copy.tar_command(self.src), check=True,
                               capture_output=True).stdout
        cut = os.path.join(self.dir, 'cut.tar')
        with open(cut, 'wb') as f:
            f.write(whole[:700])  # inside the first member's data
        with open(cut, 'rb') as f:
            done = subprocess.run(local_node(self.dest), stdin=f,
                                  capture_output=True)
        self.assertNotEqual(done.returncode, 0)
        self.assertEqual(tree(self.dest), before)
        self.assertEqual(self.leftovers(), [])

    def test_a_stream_without_bundle_toml_is_refused(self):
        before = self.old_bundle()
        os.remove(os.path.join(self.src, 'bundle.toml'))
        _, node_rc, _, out = copy.stream(copy.tar_command(self.src),
                                         local_node(self.dest))
        self.assertEqual(node_rc, 3)
        self.assertIn(b'the stream held no bundle.toml', out)
        self.assertEqual(tree(self.dest), before)
        self.assertEqual(self.leftovers(), [])

    def test_two_copies_at_once_into_one_directory_both_end_whole(self):
        # Two inventory names for one machine copy at the same time.
        self.old_bundle()
        tars = [subprocess.Popen(copy.tar_command(self.src),
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL) for _ in range(4)]
        nodes = [subprocess.Popen(local_node(self.dest), stdin=t.stdout,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT) for t in tars]
        for t in tars:
            t.stdout.close()
        outs = [n.communicate()[0] for n in nodes]
        for t in tars:
            t.wait()
        self.assertEqual([n.returncode for n in nodes], [0] * 4, outs)
        self.assertEqual(tree(self.dest), tree(self.src))
        self.assertEqual(self.leftovers(), [])

    def test_the_transfer_path_unpacks_a_tar_file(self):
        self.old_bundle()
        tar = os.path.join(self.dir, 'bundle.tar')
        with open(tar, 'wb') as f:
            subprocess.run(copy.tar_command(self.src), stdout=f, check=True,
                           stderr=subprocess.DEVNULL)
        done = subprocess.run(local_node(self.dest, tar), capture_output=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(tree(self.dest), tree(self.src))

    def test_a_dest_with_shell_characters_is_one_path(self):
        self.dest = os.path.join(self.dir, "it's $(touch pwned) ;x", 'bundle')
        tar_rc, node_rc, _, out = copy.stream(copy.tar_command(self.src),
                                              local_node(self.dest))
        self.assertEqual((tar_rc, node_rc), (0, 0), out)
        self.assertEqual(tree(self.dest), tree(self.src))
        self.assertFalse(os.path.exists('pwned'))


class CachedTarTest(unittest.TestCase):
    """The transfer's controller-side tar, made by many forks at once (CI
    once saw the second host's rename fail: both wrote one .partial)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.src = os.path.join(self.dir, 'src')
        os.makedirs(os.path.join(self.src, 'bin'))
        for rel, size in (('bundle.toml', 12), ('bin/gpunode', 4 << 20)):
            with open(os.path.join(self.src, rel), 'wb') as f:
                f.write(os.urandom(size))
        self.cache = os.path.join(self.dir, 'cache')

    def tearDown(self):
        shutil.rmtree(self.dir)

    def make_in_children(self, count):
        pids = []
        for _ in range(count):
            pid = os.fork()
            if pid == 0:  # the child: one fork of Ansible's, one host
                code = 1
                try:
                    got = copy.ActionModule._cached_tar(None, self.src, SHA, self.cache)
                    code = 0 if got.endswith('bundle-%s.tar' % SHA) else 2
                finally:
                    os._exit(code)
            pids.append(pid)
        return [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in pids]

    def test_many_hosts_at_once_share_one_whole_tar(self):
        self.assertEqual(self.make_in_children(8), [0] * 8)
        made = os.path.join(self.cache, 'bundle-%s.tar' % SHA)
        unpacked = os.path.join(self.dir, 'unpacked')
        os.makedirs(unpacked)
        subprocess.run(['tar', '-x', '-f', made, '-C', unpacked], check=True)
        self.assertEqual(tree(unpacked), tree(self.src))
        self.assertEqual(sorted(os.listdir(self.cache)),
                         ['.lock', 'bundle-%s.tar' % SHA])

    def test_a_failed_tar_leaves_no_partial_and_no_tar(self):
        with self.assertRaises(subprocess.CalledProcessError):
            copy.ActionModule._cached_tar(None, self.src + '/none', SHA, self.cache)
        self.assertEqual(os.listdir(self.cache), ['.lock'])


class SshCommandTest(unittest.TestCase):
    def test_own_session_uncompressed(self):
        built = [b'ssh', b'-C', b'-o', b'ControlMaster=auto', b'-o',
                 b'ControlPath="/root/.ansible/cp/x"', b'-p', b'2222',
                 b'host', b'cmd']
        argv = copy.uncompressed_own_session(built)
        self.assertEqual(argv[:5], [b'ssh', b'-o', b'ControlPath=none', b'-o',
                                    b'Compression=no'])
        self.assertNotIn(b'-C', argv)
        self.assertEqual(argv[5:], [a for a in built[1:] if a != b'-C'])


class FakeBecome(object):
    def __init__(self, password):
        self.password = password

    def get_option(self, name):
        if name != 'become_pass':
            raise KeyError(name)
        return self.password


class FakeConnection(object):
    def __init__(self, kind, password=None, become=None):
        self._load_name = kind
        self.password = password
        self.become = become

    def get_option(self, name):
        return self.password if name == 'password' else None

    def _build_command(self, *args):
        raise AssertionError('not called here')


class FakePlayContext(object):
    password = None


def action(connection, remote_user='ops', become_user='root'):
    module = copy.ActionModule.__new__(copy.ActionModule)
    module._connection = connection
    module._play_context = FakePlayContext()
    module._get_remote_user = lambda: remote_user
    module.get_become_option = lambda name: become_user
    return module


class MethodTest(unittest.TestCase):
    def test_ssh_and_local_stream(self):
        self.assertEqual(action(FakeConnection('ssh'))._method(), 'stream')
        self.assertEqual(action(FakeConnection('ansible.builtin.local'))._method(),
                         'stream')
        self.assertEqual(action(FakeConnection('ssh', become=FakeBecome(None)))
                         ._method(), 'stream')

    def test_a_password_or_another_connection_transfers(self):
        self.assertEqual(action(FakeConnection('ssh', password='x'))._method(),
                         'transfer')
        self.assertEqual(action(FakeConnection('ssh', become=FakeBecome('x')))
                         ._method(), 'transfer')
        self.assertEqual(action(FakeConnection('paramiko_ssh'))._method(),
                         'transfer')

    def test_become_to_the_login_user_is_no_become(self):
        # As ActionBase: root becoming root runs without become, so a
        # become password is never asked for and the stream is possible.
        module = action(FakeConnection('ssh', become=FakeBecome('x')),
                        remote_user='root', become_user='root')
        self.assertEqual(module._method(), 'stream')


class ArgumentsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        with open(os.path.join(self.dir, 'bundle.toml'), 'w') as f:
            f.write('schema = 1\n')

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_refusals(self):
        bad = copy.ActionModule._bad_args
        self.assertIsNone(bad(self.dir, '/var/cache/gpunode/bundle', SHA))
        self.assertIn('is not a directory', bad(self.dir + '/none', '/x/b', SHA))
        self.assertIn('holds no bundle.toml', bad(os.path.dirname(self.dir), '/x/b', SHA))
        for dest in ('', 'relative/bundle', '/', '//'):
            self.assertIn('absolute path below /', bad(self.dir, dest, SHA), dest)
        for dest in ('/.', '/x/..', '/x/./b', '/x/../b'):
            self.assertIn('must not hold a . or .. component',
                          bad(self.dir, dest, SHA), dest)
        for sha in ('', 'A' * 64, 'a' * 63, SHA + '\n'):
            self.assertIn('64 hex digits', bad(self.dir, '/x/b', sha), repr(sha))


if __name__ == '__main__':
    unittest.main()
