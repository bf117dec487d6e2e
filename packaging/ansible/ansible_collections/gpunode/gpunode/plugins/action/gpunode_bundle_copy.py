# -*- coding: utf-8 -*-
# gpunode_bundle_copy: the controller's bundle directory to the node as one
# tar stream, `tar -c | ssh node tar -x`, with nothing in between: no file
# on the controller, no temp copy on the node, no per-file round trip.
#
# Why an action plugin: a module runs on the node and cannot read the
# controller's disk; ansible.builtin.copy and synchronize go file by file or
# need rsync; unarchive needs a tar file made first, then sends it whole,
# then lists it, then unpacks it (three passes over a bundle of gigabytes).
#
# Two ways, by what the connection allows:
# - stream: the ssh connection without a connection password (the ssh
#   command line Ansible itself builds, so the inventory's user, port, key,
#   ssh_args, ControlPath and so on apply), or the local connection; become
#   only without a become password (nothing could answer its prompt in the
#   middle of a stream).
# - transfer: anything else (paramiko, a become or connection password):
#   the tar is made once on the controller (the cache, one per bundle.toml
#   SHA-256, kept for reruns), sent by the connection's own put_file, and
#   unpacked by the same node script through Ansible's become handling.
#
# Either way the node unpacks into DEST.gpunode-new and swaps it in only
# once tar has read the whole stream: a cut stream or a failed unpack leaves
# the node's previous bundle as it was (and the half-made one removed), and
# no file of an older bundle stays behind in the new one.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fcntl
import os
import re
import shlex
import subprocess
import tempfile

from ansible import constants as C
from ansible.errors import AnsibleConnectionFailure
from ansible.module_utils.common.text.converters import to_bytes, to_text
from ansible.plugins.action import ActionBase

# The node's side, run by /bin/sh with the bundle directory as $1 and the
# tar file as $2 (absent: the tar comes on stdin). POSIX sh, tar and
# util-linux's flock, on every node k3s supports (without flock, no lock).
NODE_SCRIPT = r'''
set -eu
dest=$1
new=$dest.gpunode-new
old=$dest.gpunode-old
trap 'rm -rf -- "$new"' EXIT
parent=$(dirname -- "$dest")
mkdir -p -- "$parent"
# One copy at a time into this directory (two inventory names for one
# machine): flock(1) on the parent itself, so no lock file is left.
exec 9<"$parent"
if command -v flock >/dev/null 2>&1; then flock 9; fi
rm -rf -- "$new" "$old"
mkdir -m 0755 -- "$new"
tar -x --no-same-owner -f "${2:--}" -C "$new"
if [ ! -f "$new/bundle.toml" ]; then
  echo "gpunode_bundle_copy: the stream held no bundle.toml" >&2
  exit 3
fi
if [ -e "$dest" ] || [ -L "$dest" ]; then mv -- "$dest" "$old"; fi
mv -- "$new" "$dest"
rm -rf -- "$old"
'''

# GNU tar's --totals line on stderr: the bytes the stream carried.
TOTALS = re.compile(r'^Total bytes written: (\d+)', re.M)

SHA256 = re.compile(r'^[0-9a-f]{64}$')


def node_command(dest, tar_file=None):
    """The node's side as one shell word list: /bin/sh -c SCRIPT sh DEST [TAR]."""
    argv = ['/bin/sh', '-c', NODE_SCRIPT, 'sh', dest]
    if tar_file:
        argv.append(tar_file)
    return ' '.join(shlex.quote(a) for a in argv)


def tar_command(src):
    """The controller's side: the bundle directory as a tar on stdout."""
    return ['tar', '--create', '--totals', '--file', '-', '--directory', src, '.']


def streamed_bytes(stderr):
    found = TOTALS.search(to_text(stderr, errors='surrogate_or_replace'))
    return int(found.group(1)) if found else None


def uncompressed_own_session(ssh_argv):
    """The ssh command Ansible built, on a session of its own and without
    compression. Ansible's default ssh_args carry -C, and a ControlMaster
    session keeps the compression its master was opened with: over zlib,
    a bundle of compressed image layers and packages moves at a sixth of
    the speed of the link (120 MB over loopback: 4.1 s against 0.6 s). A
    command line's first -o wins (ssh_config(5)), so these go first; -C
    sets compression whatever -o says, so it is dropped. The cost is one
    handshake."""
    first = [ssh_argv[0], b'-o', b'ControlPath=none', b'-o', b'Compression=no']
    return first + [a for a in ssh_argv[1:] if a != b'-C']


def stream(tar_argv, node_argv):
    """tar_argv's stdout straight into node_argv's stdin (an OS pipe, not
    through Python). Returns (rc, node rc, tar stderr, node stdout+stderr);
    both processes are ended on the way out, a KeyboardInterrupt too (the
    node's tar then reads a cut stream and its script removes what it made)."""
    with tempfile.TemporaryFile() as tar_err, tempfile.TemporaryFile() as node_out:
        tar = subprocess.Popen(tar_argv, stdout=subprocess.PIPE, stderr=tar_err)
        try:
            node = subprocess.Popen(node_argv, stdin=tar.stdout, stdout=node_out,
                                    stderr=subprocess.STDOUT)
        except BaseException:
            tar.kill()
            tar.wait()
            raise
        tar.stdout.close()
        try:
            node_rc = node.wait()
            tar_rc = tar.wait()
        except BaseException:
            for proc in (tar, node):
                proc.kill()
                proc.wait()
            raise
        tar_err.seek(0)
        node_out.seek(0)
        return tar_rc, node_rc, tar_err.read(), node_out.read()


class ActionModule(ActionBase):
    # False: ActionBase would otherwise open a session first just to make a
    # remote temp dir (0.5 s a node); only the transfer way makes one.
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(('src', 'dest', 'sha256', 'cache'))

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # ActionBase makes its own
        args = self._task.args
        src = args.get('src') or ''
        dest = args.get('dest') or ''
        sha256 = args.get('sha256') or ''
        cache = args.get('cache') or ''
        problem = self._bad_args(src, dest, sha256)
        if problem:
            result.update(failed=True, msg=problem)
            return result
        result['dest'] = dest
        if self._task.check_mode:
            result.update(changed=True, method='none',
                          msg='would copy %s to %s' % (src, dest))
            return result
        method = self._method()
        result['method'] = method
        if method == 'stream':
            result.update(self._stream(src, dest))
        else:
            result.update(self._transfer(src, dest, sha256, cache))
        if not result.get('failed'):
            result['changed'] = True
        return result

    @staticmethod
    def _bad_args(src, dest, sha256):
        if not src or not os.path.isdir(src):
            return 'src: %r is not a directory on the controller' % src
        if not os.path.isfile(os.path.join(src, 'bundle.toml')):
            return 'src: %r holds no bundle.toml' % src
        if not dest or not dest.startswith('/') or dest.rstrip('/') in ('', '/'):
            return 'dest: %r must be an absolute path below /' % dest
        if any(part in ('.', '..') for part in dest.split('/')):
            # The swap renames DEST: '.' or '..' would name a parent.
            return 'dest: %r must not hold a . or .. component' % dest
        if not SHA256.fullmatch(sha256):
            return 'sha256: the verified bundle.toml SHA-256 (64 hex digits)'
        return None

    # -- which way ---------------------------------------------------------

    def _uses_become(self):
        """Become applies as ActionBase._low_level_execute_command applies
        it: a become plugin set for this task, and a become_user other than
        the login user (unless allow_same_user)."""
        if not self._connection.become:
            return False
        ruser = self._get_remote_user()
        buser = self.get_become_option('become_user')
        return bool(C.BECOME_ALLOW_SAME_USER or buser != ruser or
                    not any((ruser, buser)))

    def _become_needs_password(self):
        if not self._uses_become():
            return False
        try:
            return bool(self._connection.become.get_option('become_pass'))
        except KeyError:
            return False

    def _connection_kind(self):
        name = getattr(self._connection, '_load_name', '') or ''
        return name.rsplit('.', 1)[-1]

    def _method(self):
        kind = self._connection_kind()
        if self._become_needs_password():
            return 'transfer'
        if kind == 'local':
            return 'stream'
        if kind == 'ssh' and hasattr(self._connection, '_build_command') and \
                not (self._connection.get_option('password') or
                     self._play_context.password):
            return 'stream'
        return 'transfer'

    # -- the stream --------------------------------------------------------

    def _node_shell_command(self, dest, tar_file=None):
        """The node's side, wrapped for become as Ansible wraps a module."""
        cmd = node_command(dest, tar_file)
        if self._uses_become():
            cmd = self._connection.become.build_become_command(
                cmd, self._connection._shell)
        return cmd

    def _node_argv(self, dest):
        cmd = self._node_shell_command(dest)
        if self._connection_kind() == 'local':
            return ['/bin/sh', '-c', cmd]
        conn = self._connection
        conn.host = conn.get_option('host') or self._play_context.remote_addr
        built = [to_bytes(a) for a in conn._build_command(
            conn.get_option('ssh_executable'), 'ssh', conn.host, cmd)]
        return uncompressed_own_session(built)

    def _stream(self, src, dest):
        tar_rc, node_rc, tar_err, node_out = stream(tar_command(src),
                                                    self._node_argv(dest))
        out = {'bytes': streamed_bytes(tar_err)}
        if node_rc == 255 and self._connection_kind() == 'ssh':
            raise AnsibleConnectionFailure(
                'gpunode_bundle_copy: ssh to the node failed: %s'
                % to_text(node_out, errors='surrogate_or_replace').strip()[-2000:])
        if tar_rc != 0 or node_rc != 0:
            out.update(failed=True, rc=node_rc or tar_rc, msg=self._failure(
                tar_rc, node_rc, tar_err, node_out, dest))
        return out

    @staticmethod
    def _failure(tar_rc, node_rc, tar_err, node_out, dest):
        text = []
        if tar_rc != 0:
            text.append('the controller\'s tar exited %d: %s' % (
                tar_rc, to_text(tar_err, errors='surrogate_or_replace').strip()[-1000:]))
        if node_rc != 0:
            text.append('the node\'s unpack exited %d: %s' % (
                node_rc, to_text(node_out, errors='surrogate_or_replace').strip()[-1000:]))
        return ('the bundle was not copied to %s (the node keeps the bundle it '
                'had): %s' % (dest, '; '.join(text)))

    # -- the transfer ------------------------------------------------------

    def _cached_tar(self, src, sha256, cache):
        """One tar a bundle.toml. Ansible's forks copy to many hosts at once,
        so the first to come makes it under the cache's lock and the others
        wait for it, then take it; it is made under a name of its own and
        renamed, so a tar cut short is never taken for a whole one."""
        cache = os.path.expanduser(cache or '~/.cache/gpunode')
        os.makedirs(cache, mode=0o700, exist_ok=True)
        path = os.path.join(cache, 'bundle-%s.tar' % sha256)
        lock = os.open(os.path.join(cache, '.lock'),
                       os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not os.path.isfile(path):
                fd, partial = tempfile.mkstemp(prefix='.bundle-', suffix='.partial',
                                               dir=cache)
                try:
                    with os.fdopen(fd, 'wb') as out:
                        subprocess.run(tar_command(src), stdout=out,
                                       stderr=subprocess.DEVNULL, check=True)
                    os.replace(partial, path)
                except BaseException:
                    os.unlink(partial)
                    raise
        finally:
            os.close(lock)
        return path

    def _transfer(self, src, dest, sha256, cache):
        try:
            local = self._cached_tar(src, sha256, cache)
        except (OSError, subprocess.CalledProcessError) as e:
            return {'failed': True, 'msg': 'the controller could not make the '
                    'bundle\'s tar in %s: %s' % (cache, e)}
        tmpdir = self._connection._shell.tmpdir or self._make_tmp_path()
        remote = self._connection._shell.join_path(tmpdir, 'bundle.tar')
        try:
            self._transfer_file(local, remote)
            self._fixup_perms2((tmpdir, remote))
            done = self._low_level_execute_command(node_command(dest, remote))
        finally:
            self._remove_tmp_path(tmpdir)
        out = {'bytes': os.path.getsize(local)}
        if done.get('rc') != 0:
            out.update(failed=True, rc=done.get('rc'), msg=self._failure(
                0, done.get('rc', 1), b'',
                to_bytes(done.get('stderr', '') + done.get('stdout', '')), dest))
        return out
