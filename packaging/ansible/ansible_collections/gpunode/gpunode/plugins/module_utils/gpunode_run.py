# -*- coding: utf-8 -*-
# Runs the gpunode binary for a module: which binary, the flags every
# command shares, and one call that returns the parsed events or fails the
# module with gpunode's own diagnosis. The argv goes to run_command as a
# list (no shell); Python standard library and Ansible's basic module only.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpunode.gpunode.plugins.module_utils.gpunode_events import (
    EventError,
    parse_events,
    result_event,
    safe_text,
)

# Options every module takes (the DOCUMENTATION fragment
# gpunode.gpunode.common says the same to ansible-doc).
COMMON_ARGS = dict(
    binary=dict(type='path'),
    bundle=dict(type='path'),
    root=dict(type='path', default='/'),
    trust_keys=dict(type='list', elements='path', default=[], no_log=False),
    insecure_skip_signature=dict(type='bool', default=False),
)

# At most this much of gpunode's stderr goes into a failure's result.
_STDERR_TAIL = 4000


def binary_of(module):
    """The gpunode to run: `binary`, else the bundle's bin/gpunode (the
    portable one the stick carries), else gpunode on PATH."""
    p = module.params
    if p.get('binary'):
        return p['binary']
    if p.get('bundle'):
        return os.path.join(p['bundle'], 'bin', 'gpunode')
    return module.get_bin_path('gpunode', required=True)


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


def run_gpunode(module, argv):
    """Runs argv (gpunode and its flags, --json among them). A run without a
    result line, or with another schema, fails the module here: nothing
    else it printed can be trusted then."""
    if not os.path.exists(argv[0]):
        module.fail_json(
            msg='gpunode binary %s does not exist: set `binary`, or `bundle` '
            'to the directory that has bin/gpunode' % safe_text(argv[0]),
            cmd=[safe_text(a) for a in argv])
    # NO_COLOR: stderr goes into results as text, not terminal codes.
    rc, out, err = module.run_command(argv, check_rc=False,
                                      environ_update={'NO_COLOR': '1'})
    events = parse_events(out)
    tail = safe_text(err[-_STDERR_TAIL:])
    try:
        result = result_event(events, rc)
    except EventError as e:
        module.fail_json(msg=str(e), rc=rc, stderr_tail=tail,
                         cmd=[safe_text(a) for a in argv])
    return Run(argv, rc, events, result, tail)
