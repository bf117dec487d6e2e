# -*- coding: utf-8 -*-
# Runs the gpunode binary for a module: which binary, the flags every
# command shares, and one call that returns the parsed events or fails the
# module with gpunode's own diagnosis. The argv goes to run_command as a
# list (no shell); Python standard library and Ansible's basic module only.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import stat
import tempfile

from ansible_collections.gpunode.gpunode.plugins.module_utils.gpunode_events import (
    EventError,
    ansible_terms,
    parse_events,
    result_event,
    safe_text,
)

# gpunode's --variant choices: `gpunode version --json`'s `variants` (its
# GPU exposure strategies). The modules' argument specs take them from
# here; their DOCUMENTATION and roles/gpunode/meta/argument_specs.yml must
# repeat them for ansible-doc, and gpunode's test/e2e/stage_list_test.cpp
# holds all of them to the binary's list.
VARIANTS = ('default', 'time-slicing')

# Options every module takes (the DOCUMENTATION fragment
# gpunode.gpunode.common says the same to ansible-doc).
COMMON_ARGS = dict(
    binary=dict(type='path'),
    bundle=dict(type='path'),
    root=dict(type='path', default='/'),
    trust_keys=dict(type='list', elements='path', default=[], no_log=False),
    insecure_skip_signature=dict(type='bool', default=False),
    bundle_sha256=dict(type='str'),
)

# At most this much of gpunode's stderr goes into a failure's result.
_STDERR_TAIL = 4000


def binary_of(module):
    """The gpunode to run, one that is trusted: `binary` (the operator named
    it), else the gpunode installed on this node (PATH; it verifies the
    bundle itself before it uses it), else the bundle's own bin/gpunode,
    but only as a private copy whose SHA-256 is the one the controller's
    verified bundle.toml records (`bundle_sha256`; see
    verified_bundle_binary). A stick's binary cannot vouch for its stick.
    None in check mode when the bundle is still to be copied and nothing
    here can plan before it (`bundle_pending`)."""
    p = module.params
    if p.get('binary'):
        return p['binary']
    installed = module.get_bin_path('gpunode')
    if installed:
        return installed
    if p.get('bundle'):
        return verified_bundle_binary(module, p['bundle'], p.get('bundle_sha256'))
    if module.check_mode and p.get('bundle_pending', False):
        return None
    module.fail_json(
        msg='no gpunode to run on this node: install the gpunode .deb, set '
        'gpunode_binary, or let the controller verify the bundle: '
        'gpunode_bundle_src',
        failure=dict(code=NO_BINARY, stage='bundle', layer='bundle'))


# Why the bundle's own binary was refused (the result's failure.code).
NO_BINARY = 'bundle.no-trusted-binary'
UNVERIFIED = 'bundle.binary-unverified'
TOML_MISMATCH = 'bundle.toml-mismatch'
BINARY_MISMATCH = 'bundle.binary-mismatch'
UNTRUSTED_BINARY = 'bundle.binary-untrusted'

_CHUNK = 1 << 20
# bundle.toml is at most this big (bundle/manifest.cpp, kMaxManifestBytes).
_MAX_TOML = 64 << 20


def _refuse(module, code, message):
    module.fail_json(msg=message, failure=dict(
        code=code, stage='bundle', layer='bundle', message=message,
        fix='install the gpunode .deb from media you trust (or set '
        'gpunode_binary), or let the controller verify the bundle: '
        'gpunode_bundle_src'))


def _read_limited(module, path, limit):
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, 'rb') as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        _refuse(module, TOML_MISMATCH, '%s is larger than a bundle.toml may '
                'be' % safe_text(path))
    return data


def listed_sha256(toml_bytes, path):
    """The sha256 bundle.toml records for PATH, from the [[files]] tables
    gpunode writes (bundle/manifest.cpp, write_manifest); None when it has
    none. Read only after its digest matched a verified one."""
    entry = None
    for raw in toml_bytes.decode('utf-8', 'replace').splitlines():
        line = raw.strip()
        if line.startswith('['):
            entry = {} if line == '[[files]]' else None
            continue
        if entry is None or ' = ' not in line:
            continue
        key, _, value = line.partition(' = ')
        if value.startswith('"') and value.endswith('"'):
            entry[key] = value[1:-1]
        if entry.get('path') == path and 'sha256' in entry:
            return entry['sha256']
    return None


def verified_bundle_binary(module, bundle, bundle_sha256):
    """The bundle's bin/gpunode, runnable only as a private copy: this
    node's bundle.toml must be the one a trusted gpunode verified (its
    SHA-256 is `bundle_sha256`), and the copy's SHA-256, taken while
    copying into a 0700 directory, the one that bundle.toml records for
    bin/gpunode. The copy, not the stick's file, runs, so the file cannot
    be swapped between the check and the exec."""
    if not bundle_sha256:
        _refuse(module, UNVERIFIED,
                'refusing to run %s/bin/gpunode: no trusted gpunode has '
                'verified this bundle (no gpunode on PATH, no gpunode_binary, '
                'and the controller did not verify it: gpunode_bundle_src)'
                % safe_text(bundle))
    toml = _read_limited(module, os.path.join(bundle, 'bundle.toml'), _MAX_TOML)
    if hashlib.sha256(toml).hexdigest() != bundle_sha256.lower():
        _refuse(module, TOML_MISMATCH,
                'refusing to run %s/bin/gpunode: this bundle.toml is not the '
                'one the controller verified (SHA-256 %s, verified %s)' % (
                    safe_text(bundle), hashlib.sha256(toml).hexdigest(),
                    safe_text(bundle_sha256)))
    want = listed_sha256(toml, 'bin/gpunode')
    if want is None:
        _refuse(module, BINARY_MISMATCH,
                'refusing to run %s/bin/gpunode: the verified bundle.toml '
                'does not list bin/gpunode' % safe_text(bundle))
    private = tempfile.mkdtemp(prefix='gpunode-', dir=module.tmpdir)
    os.chmod(private, 0o700)
    copy = os.path.join(private, 'gpunode')
    digest = hashlib.sha256()
    src = os.open(os.path.join(bundle, 'bin', 'gpunode'),
                  os.O_RDONLY | os.O_NOFOLLOW)
    dst = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                  0o700)
    with os.fdopen(src, 'rb') as fin, os.fdopen(dst, 'wb') as fout:
        for block in iter(lambda: fin.read(_CHUNK), b''):
            digest.update(block)
            fout.write(block)
    if digest.hexdigest() != want:
        os.unlink(copy)
        _refuse(module, BINARY_MISMATCH,
                'refusing to run %s/bin/gpunode: its SHA-256 %s is not the '
                '%s the verified bundle.toml records' % (
                    safe_text(bundle), digest.hexdigest(), safe_text(want)))
    return copy


def trust_flags(params):
    argv = []
    for key in params.get('trust_keys') or []:
        argv += ['--trust-key', key]
    if params.get('insecure_skip_signature'):
        argv.append('--insecure-skip-signature')
    return argv


def option_flags(params, options):
    """gpunode's flags for the module options that are set. OPTIONS is
    (option name, flag) pairs: a true bool gives the bare flag, a list one
    comma-separated value, anything else its text; unset, false, empty and
    0 give nothing (gpunode's own default then holds)."""
    argv = []
    for name, flag in options:
        value = params.get(name)
        if not value:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, list):
            argv += [flag, ','.join(value)]
        else:
            argv += [flag, str(value)]
    return argv


def root_flags(params):
    root = params.get('root') or '/'
    return [] if root == '/' else ['--root', root]


class Run(object):
    """One finished gpunode process: its exit code, its events, its result
    event (schema checked) and the tail of its stderr."""

    def __init__(self, argv, rc, events, result, stderr):
        self.argv = argv
        self.rc = rc
        self.events = events
        self.result = result
        self.stderr = stderr


def untrusted_binary(path, euid=None):
    """Why root must not run the binary at `path`, or None: it must be an
    absolute path to a regular file that nobody but root (or the user this
    runs as) could have written or replaced, the file and every directory
    above it, as sshd's StrictModes and gpunode's own trust anchors rule
    (a directory others may write is fine only when sticky, like /tmp)."""
    euid = os.geteuid() if euid is None else euid
    if not os.path.isabs(path):
        return 'is not an absolute path'
    real = os.path.realpath(path)
    st = os.stat(real)
    if not stat.S_ISREG(st.st_mode):
        return 'is not a regular file'
    at = real
    while True:
        st = os.stat(at)
        if st.st_uid not in (0, euid):
            return '%s is owned by uid %d' % (safe_text(at), st.st_uid)
        sticky_dir = stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not sticky_dir:
            return '%s is writable by %s' % (
                safe_text(at),
                'everyone' if st.st_mode & stat.S_IWOTH else 'its group')
        parent = os.path.dirname(at)
        if parent == at:
            return None
        at = parent


def run_gpunode(module, argv):
    """Runs argv (gpunode and its flags, --json among them). A run without a
    result line, or with another schema, fails the module here: nothing
    else it printed can be trusted then."""
    if not os.path.exists(argv[0]):
        module.fail_json(
            msg='gpunode binary %s does not exist: set gpunode_binary, or '
            'gpunode_bundle_dir to the directory that has bin/gpunode'
            % safe_text(argv[0]),
            cmd=[safe_text(a) for a in argv])
    why = untrusted_binary(argv[0])
    if why:
        message = 'gpunode binary %s %s' % (safe_text(argv[0]), why)
        if why not in ('is not an absolute path', 'is not a regular file'):
            message += ': it runs as root, so nobody else may be able to ' \
                'change it'
        module.fail_json(
            msg=message, cmd=[safe_text(a) for a in argv],
            failure=dict(
                code=UNTRUSTED_BINARY, stage='bundle', layer='bundle',
                message=message,
                fix='set gpunode_binary to an absolute path of a gpunode '
                'that only root can write (sudo chown root: FILE; sudo '
                'chmod go-w FILE and each directory above it), or install '
                'the gpunode .deb'))
    # NO_COLOR: stderr goes into results as text, not terminal codes.
    rc, out, err = module.run_command(argv, check_rc=False,
                                      environ_update={'NO_COLOR': '1'})
    events = parse_events(out)
    # The fix lines in it name the role's variables, as msg and fix do.
    tail = ansible_terms(safe_text(err[-_STDERR_TAIL:]))
    try:
        result = result_event(events, rc)
    except EventError as e:
        module.fail_json(msg=str(e), rc=rc, stderr_tail=tail,
                         cmd=[safe_text(a) for a in argv])
    return Run(argv, rc, events, result, tail)
